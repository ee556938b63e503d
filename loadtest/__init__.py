"""PySpark load test: simulated consumer-group members against a Kafka-protocol server.

Run `python -m loadtest --help` (also wired as `coordinator loadtest`). Needs the `loadtest`
extra (pyspark, pandas<3, pyarrow, matplotlib) and a Java 17+ runtime; the package itself only
imports pyspark where Spark is used, so `loadtest.task` and `loadtest.member` run without it.
"""
