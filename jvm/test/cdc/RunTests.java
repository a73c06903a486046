package cdc;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Comparator;

/**
 * Runs every {@code static void test...(Path repository)} method of the test classes and exits 1 when
 * one fails (jvm/build.sh test; tests/unit/spark/test_jvm.py runs it). Argument: the repository's root,
 * where the tests read their sample messages (tests/resources) and the DTS schema.
 */
public final class RunTests {
  private static final Class<?>[] TESTS = {OutcomesTest.class, BoundedDecoderTest.class, DebeziumUdfTest.class,
    DtsAvroUdfTest.class, IcebergBucketTest.class, GroupCountsTest.class};

  private RunTests() {}

  public static void main(String[] args) throws IllegalAccessException {
    Path repository = Path.of(args.length > 0 ? args[0] : ".").toAbsolutePath();
    int passed = 0, failed = 0;
    for (Class<?> tests : TESTS) {
      Method[] methods = tests.getDeclaredMethods();
      Arrays.sort(methods, Comparator.comparing(Method::getName));
      for (Method m : methods) {
        if (!m.getName().startsWith("test") || !Modifier.isStatic(m.getModifiers())) continue;
        String name = tests.getSimpleName() + "." + m.getName();
        try {
          m.invoke(null, repository);
          passed++;
          System.out.println("ok   " + name);
        } catch (InvocationTargetException e) {
          failed++;
          System.out.println("FAIL " + name + ": " + e.getCause());
          e.getCause().printStackTrace(System.out);
        }
      }
    }
    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed == 0 && passed > 0 ? 0 : 1);
  }
}
