"""The land stage's sources, one module each, over what they share (``python -m jobs land``: jobs.land.command).

- ``common``: Spark's Kafka source schema, interval names, landed intervals and their manifests (the
  commit marker), the Parquet output of an interval, the chaining of an interval on its neighbours.
- ``kafka``: a Kafka topic read from a broker (``land_kafka``), and Kafka settings from an Airflow
  connection (``kafka_consumer_config``).
- ``files``: Parquet topic dumps in Spark's Kafka schema (``land_files``).
- ``exports``: what the exports other tools wrote share: reading partition by partition in position
  order, chained on the previous landing's end positions.
- ``connect_s3``: a Kafka Connect S3 sink's objects (``land_connect_s3``).
- ``eventhubs_capture``: Azure Event Hubs Capture Avro files (``land_eventhubs_capture``).
"""
