"""spark_connector package (see the issues that build it)."""
