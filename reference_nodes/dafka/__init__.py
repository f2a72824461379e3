"""Dafka reference nodes (specs/dafka-46.md with docs/errata.md): `tower.Tower`,
`producer.Producer`, `store.Store`, `consumer.Consumer` (shared parts in `common`), and
deliberately broken variants in `mutants` (``MUTANTS``)."""
