"""The run-store core every stage writes through: record ids (`identity`), the record types
(`records`), the append-only store and its migration, shards and run card, the columnar copy, and the
one stage engine. Below every stage; above the prompt sets, the model door and the data."""
