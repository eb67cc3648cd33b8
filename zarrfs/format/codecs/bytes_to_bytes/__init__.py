"""Codecs that turn bytes into bytes: compressors and checksums."""
