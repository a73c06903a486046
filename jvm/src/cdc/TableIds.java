package cdc;

import java.io.Serializable;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Pattern;

/**
 * Table ids as jobs.model.record makes them (the JVM twin of {@code table_id_col}; the limits come from
 * there through the decoder's configuration): each part reduced to [A-Za-z0-9_$-], a part that needed
 * replacing ending in _ and a short hash of its name, long ids cut per part. Remembered per distinct
 * (database, schema, table): a topic names a handful of tables.
 */
final class TableIds implements Serializable {
  private static final long serialVersionUID = 1L;
  private static final Pattern UNSAFE = Pattern.compile("[^A-Za-z0-9_$-]");

  private final String missingPart;
  private final int hashDigits;
  private final int maxIdChars;
  private final int maxPartChars;
  private transient ConcurrentHashMap<List<String>, String> known;

  TableIds(String missingPart, int hashDigits, int maxIdChars, int maxPartChars) {
    this.missingPart = missingPart;
    this.hashDigits = hashDigits;
    this.maxIdChars = maxIdChars;
    this.maxPartChars = maxPartChars;
  }

  /** The rules a decoder's configuration carries (jobs/formats/base.py decoded_on_jvm). */
  static TableIds fromConfig(com.fasterxml.jackson.databind.JsonNode config) {
    return new TableIds(config.get("missing_part").asText(), config.get("name_hash_digits").asInt(),
        config.get("max_id_chars").asInt(), config.get("max_part_chars").asInt());
  }

  String of(String database, String schema, String table) {
    if (known == null) known = new ConcurrentHashMap<>();
    List<String> parts = Arrays.asList(database, schema, table);
    String id = known.get(parts);
    if (id == null) {
      id = make(database, schema, table);
      if (known.size() < 100_000) known.put(parts, id);
    }
    return id;
  }

  private String make(String database, String schema, String table) {
    String whole = part(database) + "." + part(schema) + "." + part(table);
    if (length(whole) <= maxIdChars) return whole;
    return shortPart(database) + "." + shortPart(schema) + "." + shortPart(table);
  }

  private String safe(String part) {
    if (part == null || part.isEmpty()) return missingPart;
    return UNSAFE.matcher(part).replaceAll("_");
  }

  private String part(String part) {
    String safe = safe(part);
    if (part == null || part.isEmpty() || safe.equals(part)) return safe;
    return safe + "_" + hash(part);
  }

  private String shortPart(String part) {
    String whole = part(part);
    if (length(whole) <= maxPartChars) return whole;
    String safe = safe(part);
    return safe.substring(0, Math.min(safe.length(), maxPartChars)) + "_" + hash(part);
  }

  private static int length(String s) {
    return s.codePointCount(0, s.length());
  }

  private String hash(String part) {
    try {
      byte[] digest = MessageDigest.getInstance("SHA-256").digest(part.getBytes(StandardCharsets.UTF_8));
      StringBuilder hex = new StringBuilder();
      for (byte b : digest) hex.append(String.format("%02x", b));
      return hex.substring(0, hashDigits);
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
