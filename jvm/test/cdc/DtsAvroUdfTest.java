package cdc;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.EncoderFactory;
import org.apache.spark.sql.Row;

/** The DTS Avro decoder's reading of records encoded against the official Record schema, as DTS sends them. */
final class DtsAvroUdfTest {
  private DtsAvroUdfTest() {}

  static final String SCHEMA_FILE = "jobs/formats/dts_avro/schemas/dts_record.avsc";

  static DtsAvroUdf decoder(Path repository) throws IOException {
    String schema = Files.readString(repository.resolve(SCHEMA_FILE));
    String config = "{\"format\": \"dts_avro\", \"primary_keys\": {}, \"primary_key_globs\": [], "
        + "\"no_table\": \"_._._\", \"missing_part\": \"_\", \"name_hash_digits\": 8, \"max_id_chars\": 234, "
        + "\"max_part_chars\": 64, \"schema\": " + new com.fasterxml.jackson.databind.ObjectMapper()
        .writeValueAsString(schema) + "}";
    return new DtsAvroUdf(config);
  }

  static Schema named(Schema all, String name) {
    return all.getTypes().stream().filter(t -> t.getName().equals(name)).findFirst().orElseThrow();
  }

  /** An INSERT of (a Integer 1, b Character "x") into mydb.t1, keyed by a, at {@code position}. */
  static byte[] insert(Path repository, long id, String position) throws IOException {
    Schema all = new Schema.Parser().parse(Files.readString(repository.resolve(SCHEMA_FILE)));
    Schema recordSchema = named(all, "Record");
    GenericRecord integer = new GenericData.Record(named(all, "Integer"));
    integer.put("precision", 32);
    integer.put("value", "1");
    GenericRecord character = new GenericData.Record(named(all, "Character"));
    character.put("charset", "utf8mb4");
    character.put("value", ByteBuffer.wrap("x".getBytes(StandardCharsets.UTF_8)));
    GenericRecord source = new GenericData.Record(recordSchema.getField("source").schema());
    Schema sourceType = source.getSchema().getField("sourceType").schema();
    source.put("sourceType", new GenericData.EnumSymbol(sourceType, "MySQL"));
    source.put("version", "8.0.28");
    GenericRecord r = new GenericData.Record(recordSchema);
    r.put("version", 0);
    r.put("id", id);
    r.put("sourceTimestamp", 1696984408L);
    r.put("sourcePosition", position);
    r.put("safeSourcePosition", position);
    r.put("sourceTxid", "0");
    r.put("source", source);
    r.put("operation", new GenericData.EnumSymbol(recordSchema.getField("operation").schema(), "INSERT"));
    r.put("objectName", "mydb.t1");
    r.put("tags", Map.of("pk_uk_info", "{\"PRIMARY\":[\"a\"]}"));
    r.put("fields", List.of(field(all, "a", 3), field(all, "b", 253)));
    r.put("afterImages", List.of(integer, character));
    r.put("bornTimestamp", 0L);
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
    new GenericDatumWriter<GenericRecord>(recordSchema).write(r, encoder);
    encoder.flush();
    return out.toByteArray();
  }

  static GenericRecord field(Schema all, String name, int type) {
    GenericRecord f = new GenericData.Record(named(all, "Field"));
    f.put("name", name);
    f.put("dataTypeNumber", type);
    return f;
  }

  static void testAnInsertIsPlacedAtItsBinlogPositionThenItsId(Path repository) throws IOException {
    Row outcome = decoder(repository).call(insert(repository, 12, "72469@78"), "t", 0, 3L, 0L);
    Row record = Rows.onlyRecord(outcome);
    Check.equal("mydb._.t1", record.getString(1), "table_id");
    Check.equal("INSERT", record.getString(2), "op");
    Check.equal(Map.of("a", "1"), Rows.map(record, 4), "key");
    Check.equal(Map.of("a", "1", "b", "x"), Rows.map(record, 6), "after");
    Check.equal("0000000078.00000000000000072469.00000000000000000012", record.getString(8), "position");
  }

  static void testBytesThatAreNoRecordAreQuarantined(Path repository) throws IOException {
    byte[] whole = insert(repository, 1, "4@1");
    byte[][] broken = {"not avro at all".getBytes(StandardCharsets.UTF_8),
      java.util.Arrays.copyOf(whole, whole.length - 3),  // cut short
      {0, 2, 2, (byte) 0x80, (byte) 0x80, (byte) 0x80, (byte) 0x80, 0x08}};  // a 1 GB sourcePosition claimed
    for (byte[] value : broken) {
      Row outcome = decoder(repository).call(value, "t", 0, 3L, 0L);
      Check.equal("quarantined", outcome.getString(0), "status");
      Check.contains("not a DTS Avro Record", outcome.getString(1), "reason");
    }
  }
}
