package org.gocd.contrib.reuse.bridge;

import com.thoughtworks.go.plugin.api.GoPlugin;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;

import javax.xml.parsers.DocumentBuilderFactory;
import java.io.DataInputStream;
import java.io.InputStream;
import java.lang.reflect.Modifier;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Loads the BUILT jar the way GoCD does: in its own class loader whose parent holds only go-plugin-api,
 * finds the {@code @Extension} class by scanning every class, and instantiates it.
 */
class PluginJarIT {
    private static Path jar;
    private static URLClassLoader apiLoader;

    @BeforeAll
    static void locateJar() throws Exception {
        String configured = System.getProperty("bridge.jar");
        assertNotNull(configured, "run through `mvn verify` (failsafe sets bridge.jar)");
        jar = Path.of(configured);
        assertTrue(Files.isRegularFile(jar), "the jar is built before integration tests: " + jar);
        URL api = GoPlugin.class.getProtectionDomain().getCodeSource().getLocation();
        // Parent: the platform loader (the JDK only), so nothing of the test classpath leaks in.
        apiLoader = new URLClassLoader("go-plugin-api", new URL[]{api}, ClassLoader.getPlatformClassLoader());
    }

    @Test
    void exactlyOneExtensionClassIsFoundAndInstantiatedLikeGocdDoes() throws Exception {
        @SuppressWarnings("unchecked")
        Class<? extends java.lang.annotation.Annotation> extension = (Class<? extends java.lang.annotation.Annotation>)
                apiLoader.loadClass("com.thoughtworks.go.plugin.api.annotation.Extension");
        Class<?> goPlugin = apiLoader.loadClass("com.thoughtworks.go.plugin.api.GoPlugin");

        List<Class<?>> extensions = new ArrayList<>();
        try (URLClassLoader pluginLoader = new URLClassLoader("plugin", new URL[]{jar.toUri().toURL()}, apiLoader);
             JarFile file = new JarFile(jar.toFile())) {
            for (JarEntry entry : Collections.list(file.entries())) {
                if (entry.getName().endsWith(".class")) {
                    String name = entry.getName().replace('/', '.').substring(0, entry.getName().length() - 6);
                    Class<?> type = pluginLoader.loadClass(name);
                    assertEquals(pluginLoader, type.getClassLoader(), name + " must come from the jar");
                    if (type.isAnnotationPresent(extension)) {
                        extensions.add(type);
                    }
                }
            }
            assertEquals(1, extensions.size(), "one @Extension class: " + extensions);
            Class<?> pluginClass = extensions.get(0);
            assertTrue(Modifier.isPublic(pluginClass.getModifiers()));
            assertTrue(goPlugin.isAssignableFrom(pluginClass));
            Object plugin = pluginClass.getConstructor().newInstance();

            Object identifier = goPlugin.getMethod("pluginIdentifier").invoke(plugin);
            assertEquals("elastic-agent", identifier.getClass().getMethod("getExtension").invoke(identifier));
            assertEquals(List.of("5.0"),
                    identifier.getClass().getMethod("getSupportedExtensionVersions").invoke(identifier));
        }
    }

    @Test
    void pluginXmlDescribesThePlugin() throws Exception {
        try (JarFile file = new JarFile(jar.toFile())) {
            JarEntry entry = file.getJarEntry("plugin.xml");
            assertNotNull(entry, "plugin.xml at the jar root");
            Document xml;
            try (InputStream in = file.getInputStream(entry)) {
                xml = DocumentBuilderFactory.newInstance().newDocumentBuilder().parse(in);
            }
            Element root = xml.getDocumentElement();
            assertEquals("go-plugin", root.getTagName());
            assertEquals("cd.go.contrib.elasticagent.kubernetes-reuse", root.getAttribute("id"));
            assertTrue(root.getAttribute("id").matches("[\\w\\-.]+"));
            assertEquals("1", root.getAttribute("version"));
            assertFalse(text(root, "name").isBlank());
            assertEquals(System.getProperty("bridge.plugin.version"), text(root, "version"));
            assertEquals("22.1.0", text(root, "target-go-version"));
            assertFalse(text(root, "description").isBlank());
            assertFalse(text(root, "vendor").isBlank());
            assertFalse(text(root, "description").contains("${"), "resources are filtered");
        }
    }

    @Test
    void manifestHasNoBundleSymbolicNameAndTheJarNoGocdApiClasses() throws Exception {
        try (JarFile file = new JarFile(jar.toFile())) {
            Manifest manifest = file.getManifest();
            assertNotNull(manifest);
            assertNull(manifest.getMainAttributes().getValue("Bundle-SymbolicName"));
            for (JarEntry entry : Collections.list(file.entries())) {
                assertFalse(entry.getName().startsWith("com/thoughtworks/go/plugin/api"), entry.getName());
                assertFalse(entry.getName().endsWith("Test.class") || entry.getName().endsWith("IT.class"),
                        "no test classes in the jar: " + entry.getName());
            }
        }
    }

    @Test
    void classesAreJava17Bytecode() throws Exception {
        try (JarFile file = new JarFile(jar.toFile())) {
            for (JarEntry entry : Collections.list(file.entries())) {
                if (entry.getName().endsWith(".class")) {
                    try (DataInputStream in = new DataInputStream(file.getInputStream(entry))) {
                        assertEquals(0xCAFEBABE, in.readInt());
                        in.readUnsignedShort();
                        assertEquals(61, in.readUnsignedShort(), entry.getName());
                    }
                }
            }
        }
    }

    private static String text(Element root, String tag) {
        return root.getElementsByTagName(tag).item(0).getTextContent().trim();
    }
}
