package cdc;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Collectors;
import org.apache.spark.sql.Row;

/** The Debezium decoder's parsing, on the samples of tests/resources/debezium and messages as documented. */
final class DebeziumUdfTest {
  private DebeziumUdfTest() {}

  // as jobs/formats/base.py decoded_on_jvm makes it, without --primary-keys
  static final String CONFIG = "{\"format\": \"debezium\", \"primary_keys\": {}, \"primary_key_globs\": [], "
      + "\"no_table\": \"_._._\", \"missing_part\": \"_\", \"name_hash_digits\": 8, \"max_id_chars\": 234, "
      + "\"max_part_chars\": 64, \"unavailable\": [\"__debezium_unavailable_value\"], "
      + "\"key_setting\": \"--primary-keys (tables[].primary_keys in a pipeline file)\"}";

  static Row decode(String key, String value) throws IOException {
    byte[] k = key == null ? null : key.getBytes(StandardCharsets.UTF_8);
    return new DebeziumUdf(CONFIG).call(k, value.getBytes(StandardCharsets.UTF_8), "t", 0, 7L, 0L, null);
  }

  /** A sample file's messages: its JSON lines (a licence header is not one). */
  static List<String> lines(Path repository, String sample) throws IOException {
    return Files.readAllLines(repository.resolve("tests/resources/debezium").resolve(sample)).stream()
        .filter(line -> line.startsWith("{")).collect(Collectors.toList());
  }

  static void testAnUpdateOfFlinksMySqlSampleIsPlacedAtItsBinlogPosition(Path repository) throws IOException {
    // the 11th message: product 107's update at mysql-bin.000003:717, with its schema section (and its key)
    String value = lines(repository, "flink/debezium-data-schema-include.txt").get(10);
    Row record = Rows.onlyRecord(decode("{\"id\": 107}", value));
    Check.equal("inventory._.products", record.getString(1), "table_id");
    Check.equal("UPDATE", record.getString(2), "op");
    Check.equal("rocks", Rows.map(record, 6).get("name"), "after name");
    // a FLOAT column: its value as a double renders it, the float the sample's test expects
    Check.equal(5.3f, Float.parseFloat(Rows.map(record, 5).get("weight")), "before weight");
    Check.equal(5.1f, Float.parseFloat(Rows.map(record, 6).get("weight")), "after weight");
    Check.equal("00000000000000000003.00000000000000000717.0000000000", record.getString(8), "position");
  }

  static void testAPostgreSqlPositionStartsWithThePreviousCommitsLsn(Path repository) throws IOException {
    String value = "{\"op\": \"c\", \"after\": {\"id\": 1}, \"source\": {\"connector\": \"postgresql\", \"db\": \"d\", "
        + "\"schema\": \"s\", \"table\": \"t\", \"lsn\": 100, \"sequence\": \"[\\\"90\\\",\\\"100\\\"]\"}}";
    Row record = Rows.onlyRecord(decode("{\"id\": 1}", value));
    Check.equal("00000000000000000090.00000000000000000100", record.getString(8), "position");
    Check.equal("d.s.t", record.getString(1), "table_id");
  }

  static void testTombstonesAreIgnoredAndBrokenJsonQuarantined(Path repository) throws IOException {
    Row tombstone = new DebeziumUdf(CONFIG).call(null, new byte[0], "t", 0, 1L, 0L, null);
    Check.equal("ignored", tombstone.getString(0), "a tombstone");
    Check.equal("tombstone", tombstone.getString(1), "its reason");
    Row broken = decode(null, "{\"op\": \"c\", ");
    Check.equal("quarantined", broken.getString(0), "broken JSON");
    Check.equal("malformed JSON or not a JSON object", broken.getString(1), "its reason");
  }

  static void testAKeylessUpdateNamesBothWaysToGiveTheKey(Path repository) throws IOException {
    String value = "{\"op\": \"u\", \"after\": {\"id\": 1}, \"source\": {\"connector\": \"postgresql\", "
        + "\"db\": \"d\", \"schema\": \"s\", \"table\": \"t\", \"lsn\": 5}}";
    Row outcome = decode(null, value);
    Check.equal("quarantined", outcome.getString(0), "status");
    Check.equal("update has no key and no 'before' image: give --primary-keys (tables[].primary_keys in a "
        + "pipeline file), send message keys, or set REPLICA IDENTITY FULL on a PostgreSQL source",
        outcome.getString(1), "reason");
  }
}
