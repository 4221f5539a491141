"""How far to trust a number: the judge report card (`report_card`, `probes`), the user-agent audit
(`audit`), and the statistics of repeated runs (docs/trust.md)."""
