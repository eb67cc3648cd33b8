"""Codecs, grouped as the spec groups them, and the pipeline that chains them."""

from .base import ArraySpec
from .pipeline import CodecPipeline, V2Pipeline, build_pipeline, v2_pipeline
from .registry import build_codec

__all__ = ["ArraySpec", "CodecPipeline", "V2Pipeline", "build_codec", "build_pipeline", "v2_pipeline"]
