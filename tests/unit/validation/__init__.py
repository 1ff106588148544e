"""Tests for proxy.validation: spec examples, invalid corpus, facet rules, formats."""
