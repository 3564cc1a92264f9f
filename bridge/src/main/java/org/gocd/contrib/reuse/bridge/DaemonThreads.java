package org.gocd.contrib.reuse.bridge;

import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Thread factory for every thread the bridge starts.
 *
 * <p>GoCD requires plugin threads to be daemon threads: a non-daemon thread left behind by a plugin keeps
 * the server's JVM from exiting. Names carry a prefix so a thread dump shows which part started them.
 */
final class DaemonThreads implements ThreadFactory {
    private final String prefix;
    private final AtomicInteger counter = new AtomicInteger();

    DaemonThreads(String prefix) {
        this.prefix = "kubernetes-reuse-" + prefix;
    }

    @Override
    public Thread newThread(Runnable task) {
        Thread thread = new Thread(task, prefix + "-" + counter.incrementAndGet());
        thread.setDaemon(true);
        return thread;
    }

    /** Starts one named daemon thread. */
    static Thread start(String name, Runnable task) {
        Thread thread = new DaemonThreads(name).newThread(task);
        thread.start();
        return thread;
    }
}
