package cdc;

import java.util.Objects;

/** A tiny assertion harness: no JUnit jar can be installed offline, and these checks need no more. */
final class Check {
  private Check() {}

  static void equal(Object expected, Object actual, String what) {
    if (!Objects.equals(expected, actual)) {
      throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
    }
  }

  static void isTrue(boolean condition, String what) {
    if (!condition) throw new AssertionError(what);
  }

  static void contains(String expectedPart, String actual, String what) {
    if (actual == null || !actual.contains(expectedPart)) {
      throw new AssertionError(what + ": expected a text containing <" + expectedPart + "> but was <" + actual + ">");
    }
  }
}
