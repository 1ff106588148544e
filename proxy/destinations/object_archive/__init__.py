"""The object-storage archive destination (S3 API)."""
