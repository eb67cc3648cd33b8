"""Codecs that turn an array into another array."""
