"""Codecs that serialize an array to bytes."""
