"""dpch: a differential-privacy proxy for ClickHouse."""
