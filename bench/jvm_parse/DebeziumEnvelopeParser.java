// A Spark Java UDF: one Debezium JSON value (bytes) -> the envelope the bench's floor parses with
// from_json (op, before, after, source as map<string,string>, ts_ms), in one streaming pass of
// Jackson (Spark's own JSON library). Scalars keep their text exactly as sent; an object or array
// value is kept as its JSON text, as from_json renders it into a string; a value that is not a JSON
// object is an envelope of nulls and an empty one null, as from_json has them. Bench only
// (bench/jvm_parse.py).
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import java.io.StringWriter;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.api.java.UDF1;

public class DebeziumEnvelopeParser implements UDF1<byte[], Row> {
  private static final JsonFactory JSON = new JsonFactory();
  private static final Row UNREADABLE = RowFactory.create(null, null, null, null, null);

  @Override
  public Row call(byte[] value) throws Exception {
    if (value == null || value.length == 0) return null;
    try (JsonParser p = JSON.createParser(value)) {
      if (p.nextToken() != JsonToken.START_OBJECT) return UNREADABLE;
      String op = null;
      Map<String, String> before = null, after = null, source = null;
      Long tsMs = null;
      while (p.nextToken() == JsonToken.FIELD_NAME) {
        String name = p.currentName();
        JsonToken t = p.nextToken();
        switch (name) {
          case "op": op = scalar(p, t); break;
          case "before": before = image(p, t); break;
          case "after": after = image(p, t); break;
          case "source": source = image(p, t); break;
          case "ts_ms": tsMs = t == JsonToken.VALUE_NUMBER_INT ? p.getLongValue() : null; break;
          default: p.skipChildren();
        }
      }
      return RowFactory.create(op, before, after, source, tsMs);
    } catch (JsonProcessingException e) {
      return UNREADABLE;
    }
  }

  private static String scalar(JsonParser p, JsonToken t) throws Exception {
    if (t == JsonToken.VALUE_NULL) return null;
    if (t == JsonToken.START_OBJECT || t == JsonToken.START_ARRAY) {
      StringWriter out = new StringWriter();
      try (JsonGenerator g = JSON.createGenerator(out)) {
        g.copyCurrentStructure(p);
      }
      return out.toString();
    }
    return p.getText();
  }

  private static Map<String, String> image(JsonParser p, JsonToken t) throws Exception {
    if (t != JsonToken.START_OBJECT) {
      p.skipChildren();
      return null;
    }
    Map<String, String> image = new LinkedHashMap<>();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String column = p.currentName();
      image.put(column, scalar(p, p.nextToken()));
    }
    return image;
  }
}
