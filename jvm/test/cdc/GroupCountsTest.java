package cdc;

import java.nio.file.Path;
import scala.Tuple2;

/** The grouped count's buffer: partial buffers merged as one, null groups skipped, the text in group order. */
final class GroupCountsTest {
  private GroupCountsTest() {}

  static void testPartialBuffersMergeIntoTheCountsOfAllRows(Path repository) {
    GroupCounts counts = new GroupCounts();
    GroupCounts.Buffer left = counts.zero(), right = counts.zero();
    counts.reduce(left, new Tuple2<>("[\"b\"]", 2L));
    counts.reduce(left, new Tuple2<>("[\"a\"]", null));  // a null value adds nothing, the row counts
    counts.reduce(right, new Tuple2<>("[\"b\"]", 5L));
    counts.reduce(right, new Tuple2<>(null, 9L));  // no group: not counted
    Check.equal("[[[\"a\"],1,0],[[\"b\"],2,7]]", counts.finish(counts.merge(left, right)), "merged counts");
  }

  static void testNoRowsAreAnEmptyList(Path repository) {
    GroupCounts counts = new GroupCounts();
    Check.equal("[]", counts.finish(counts.zero()), "no groups");
  }
}
