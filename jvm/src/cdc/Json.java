package cdc;

import com.fasterxml.jackson.core.JsonEncoding;
import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import org.apache.spark.sql.catalyst.json.JSONOptions;

/**
 * JSON read as Spark SQL's {@code from_json} reads it, so that a decoder on the JVM side gives the
 * values, and so the event ids, that the formats decoded in Spark SQL give: the same parser features (Spark's own
 * factory: single quotes, NaN and Infinity allowed), a value read into a string rendered as from_json
 * renders it (a string's text; an integer's digits; any other number through a double, as Jackson's
 * generator writes it; an object or array as its compact JSON), map keys repeated: the last value in
 * the first one's place, and malformed UTF-8 read as the replacement character.
 */
final class Json {
  /**
   * The longest string a message may hold, in characters: Jackson's own bound (20M) would quarantine
   * the value of a large TEXT or JSON column as malformed JSON; memory is the real bound. The Spark SQL
   * side reads with the same (jobs/formats/base.py JSON_LIMITS).
   */
  static final String MAX_STRING_CHARS = "536870912";

  static final JsonFactory FACTORY =
      new JSONOptions(scala.collection.immutable.Map$.MODULE$.<String, String>empty()
          .updated("maxStringLen", MAX_STRING_CHARS), "UTC", "")
          .buildJsonFactory();

  private Json() {}

  /** Reads one parsed document; may throw on malformed JSON. */
  interface Reader<T> {
    T read(JsonParser p) throws IOException;
  }

  /**
   * {@code reader} over {@code bytes}; {@code broken} when they are not JSON. Spark decodes the bytes
   * through a reader that replaces malformed UTF-8, which a byte parser reports as an error: a value
   * that fails is read again as that text before it is called broken.
   */
  static <T> T read(byte[] bytes, Reader<T> reader, T broken) {
    try (JsonParser p = FACTORY.createParser(bytes)) {
      return reader.read(p);
    } catch (IOException | RuntimeException e) {
      return readText(new String(bytes, StandardCharsets.UTF_8), reader, broken);
    }
  }

  static <T> T readText(String text, Reader<T> reader, T broken) {
    try (JsonParser p = FACTORY.createParser(text)) {
      return reader.read(p);
    } catch (IOException | RuntimeException e) {
      return broken;
    }
  }

  /** The value at the parser's current token ({@code t}) as from_json renders it into a string. */
  static String text(JsonParser p, JsonToken t) throws IOException {
    switch (t) {
      case VALUE_NULL:
        return null;
      case VALUE_STRING:
        return p.getText();
      case VALUE_TRUE:
        return "true";
      case VALUE_FALSE:
        return "false";
      case VALUE_NUMBER_INT:
        String digits = p.getText();
        return "-0".equals(digits) ? "0" : digits;
      case VALUE_NUMBER_FLOAT:
        double d = p.getDoubleValue();
        String number = Double.toString(d);
        // the generator quotes what is no JSON number (QUOTE_NON_NUMERIC_NUMBERS)
        return Double.isFinite(d) ? number : '"' + number + '"';
      default:
        return copy(p);
    }
  }

  /** The object or array at the parser's current token as compact JSON, as Jackson's generator copies it. */
  static String copy(JsonParser p) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream(64);
    try (JsonGenerator g = FACTORY.createGenerator(out, JsonEncoding.UTF8)) {
      g.copyCurrentStructure(p);
    }
    return new String(out.toByteArray(), StandardCharsets.UTF_8);
  }

  /** The object at the parser's current START_OBJECT as map&lt;string,string&gt;. */
  static LinkedHashMap<String, String> map(JsonParser p) throws IOException {
    LinkedHashMap<String, String> out = new LinkedHashMap<>();
    while (p.nextToken() == JsonToken.FIELD_NAME) {
      String name = p.currentName();
      out.put(name, text(p, p.nextToken()));
    }
    return out;
  }

  /** A whole document read as {@code from_json(doc, 'map<string,string>')}: null unless a JSON object. */
  static final Reader<LinkedHashMap<String, String>> MAP =
      p -> p.nextToken() == JsonToken.START_OBJECT ? map(p) : null;

  static LinkedHashMap<String, String> parseMap(byte[] bytes) {
    return bytes == null ? null : read(bytes, MAP, null);
  }

  static LinkedHashMap<String, String> parseMap(String text) {
    return text == null ? null : readText(text, MAP, null);
  }

  /** Whether {@code needle} occurs in {@code haystack} (Spark's byte-wise {@code contains}). */
  static boolean contains(byte[] haystack, byte[] needle) {
    outer:
    for (int i = 0, last = haystack.length - needle.length; i <= last; i++) {
      for (int j = 0; j < needle.length; j++) {
        if (haystack[i + j] != needle[j]) continue outer;
      }
      return true;
    }
    return false;
  }
}
