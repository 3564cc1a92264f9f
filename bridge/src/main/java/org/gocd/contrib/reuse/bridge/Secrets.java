package org.gocd.contrib.reuse.bridge;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Base64;

/**
 * The shared secret between the bridge and the backend: generating it and comparing it.
 *
 * <p>The comparison runs in constant time so that a local process probing the callback endpoint cannot
 * learn the token byte by byte from response times.
 */
final class Secrets {
    private static final SecureRandom RANDOM = new SecureRandom();

    private Secrets() {
    }

    /** A fresh 256-bit token, URL-safe so it survives environment variables and headers unchanged. */
    static String newToken() {
        byte[] bytes = new byte[32];
        RANDOM.nextBytes(bytes);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    }

    /**
     * Whether an {@code Authorization} header carries exactly {@code Bearer <expected>}.
     * A missing expected token refuses everything: an unconfigured bridge must not accept calls.
     */
    static boolean bearerMatches(String authorizationHeader, String expected) {
        if (expected == null || expected.isEmpty() || authorizationHeader == null) {
            return false;
        }
        byte[] given = authorizationHeader.getBytes(StandardCharsets.UTF_8);
        byte[] wanted = ("Bearer " + expected).getBytes(StandardCharsets.UTF_8);
        return MessageDigest.isEqual(given, wanted);
    }
}
