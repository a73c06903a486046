package cdc;

import java.nio.file.Path;

/** The helpers every JVM-side decoder shares: positions padded so that string order is source order. */
final class OutcomesTest {
  private OutcomesTest() {}

  static void testPaddedPositionsSortAsUnsigned64BitNumbers(Path repository) {
    Check.equal("00000000000000000717", Outcomes.padUnsigned("717", 20), "a plain number");
    Check.equal("0000000078", Outcomes.padUnsigned("0078", 10), "leading zeros");
    // a long past 2^63 arrives negative: the unsigned value it stands for
    Check.equal("18446744073709551615", Outcomes.padUnsigned("-1", 20), "2^64 - 1 sent as -1");
    Check.equal("09223372036854775616", Outcomes.padUnsigned("-9223372036854776000", 20),
        "a long rounded by a JSON writer");
    Check.equal(null, Outcomes.padUnsigned("mysql-bin", 20), "not a number");
  }

  static void testAMillisecondTimePastWhatATimestampHoldsIsNone(Path repository) {
    Check.equal("2020-05-13T13:39:35.766Z", String.valueOf(Outcomes.millis(1589377175766L)), "a time");
    Check.equal(null, Outcomes.millis(Long.MAX_VALUE), "no overflow");
  }
}
