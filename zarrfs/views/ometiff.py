"""`image.ome.tif` of an OME-Zarr image group: one OME-TIFF as Bio-Formats, QuPath and
tifffile read it. Every plane of the first level is a page (in the order the OME-XML's
DimensionOrder names), the other levels are each page's SubIFDs, the OME-XML is the
first page's ImageDescription; the layout is legacy/tiff.py's, tiled like the chunks."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any
from xml.sax.saxutils import quoteattr

from .. import __version__
from ..format import Array
from .legacy.tiff import TiffView
from .ngff import PIXEL_TYPES, Image

NAME = "image.ome.tif"
_NAMESPACE = "http://www.openmicroscopy.org/Schemas/OME/2016-06"
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def ome_xml(image: Image) -> str:
    """The OME-XML that describes the image: one Image, its Pixels, Channels and one
    TiffData that maps every plane to the IFDs in order."""
    array = image.array
    dtype = array.dtype.little_endian
    pixels = {
        "ID": "Pixels:0",
        "DimensionOrder": image.dimension_order,
        "Type": PIXEL_TYPES[f"{dtype.kind}{dtype.itemsize}"],
        "SizeX": image.size("X"),
        "SizeY": image.size("Y"),
        "SizeZ": image.size("Z"),
        "SizeC": image.size("C"),
        "SizeT": image.size("T"),
        "BigEndian": "false",
        "Interleaved": "false",
    }
    for dim in "XYZ":
        found = image.physical_size(dim)
        if found is not None:
            pixels[f"PhysicalSize{dim}"], pixels[f"PhysicalSize{dim}Unit"] = _number(found[0]), found[1]
    found = image.physical_size("T")
    if found is not None:
        pixels["TimeIncrement"], pixels["TimeIncrementUnit"] = _number(found[0]), found[1]
    channels = []
    for i, channel in enumerate(image.channels):
        attributes = {"ID": f"Channel:0:{i}", "SamplesPerPixel": 1}
        if channel.name is not None:
            attributes["Name"] = channel.name
        if channel.color is not None:
            attributes["Color"] = channel.color
        channels.append(f"<Channel{_attributes(attributes)}/>")
    planes = image.size("Z") * image.size("C") * image.size("T")
    positions = "".join(_planes(image))
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<OME xmlns="{_NAMESPACE}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"'
        f' xsi:schemaLocation="{_NAMESPACE} {_NAMESPACE}/ome.xsd"'
        f" Creator={quoteattr(f'zarrfs {__version__}')}>"
        f"<Image{_attributes({'ID': 'Image:0', 'Name': image.name})}>"
        f"<Pixels{_attributes(pixels)}>" + "".join(channels) + f'<TiffData IFD="0" PlaneCount="{planes}"/>'
        f"{positions}</Pixels></Image></OME>"
    )


def _planes(image: Image) -> list[str]:
    """Where the image is translated (NGFF `translation`): each plane's Plane, its
    PositionX/Y/Z the place of its first pixel, in the order of the IFDs."""
    if image.origin is None:
        return []
    fixed = {}
    for dim in "XY":
        found = image.physical_size(dim)
        if found is not None:
            fixed[f"Position{dim}"], fixed[f"Position{dim}Unit"] = (
                _number(image.origin[image.dims.index(dim)]),
                found[1],
            )
    z = image.physical_size("Z")
    order = image.dimension_order[2:]  # fastest first
    sizes = {d: image.size(d) for d in order}
    out = []
    for index in range(sizes[order[0]] * sizes[order[1]] * sizes[order[2]]):
        at = {d: 0 for d in order}
        rest = index
        for d in order:
            at[d], rest = rest % sizes[d], rest // sizes[d]
        attributes = {"TheZ": at["Z"], "TheT": at["T"], "TheC": at["C"], **fixed}
        if z is not None:
            attributes["PositionZ"] = _number(image.origin[image.dims.index("Z")] + at["Z"] * z[0])
            attributes["PositionZUnit"] = z[1]
        out.append(f"<Plane{_attributes(attributes)}/>")
    return out


def ome_tiff_view(image: Image, chunks_of: Callable[[Array], object]) -> TiffView:
    """The file: the first level's planes, the others as their SubIFDs, tiled like the
    chunks; `chunks_of` gives where each level's chunks come from."""
    first, *reduced = image.levels
    return TiffView(
        first.array,
        chunks_of(first.array),
        overviews=[(lv.array, chunks_of(lv.array)) for lv in reduced],
        subifds=True,
        tiles=True,
        description=ome_xml(image).encode(),
        pixel_sizes=[image.pixel_size_cm(i) for i in range(len(image.levels))],
    )


def describe(image: Image) -> list[tuple[str, str]]:
    """`info`'s lines on what image.ome.tif says."""
    dims = "".join(image.dims)
    lines = [
        (
            NAME,
            f"OME-TIFF of NGFF {image.version} image {image.name!r}, axes {dims}, "
            f"shape {'x'.join(map(str, image.array.shape))}, DimensionOrder {image.dimension_order}",
        )
    ]
    sizes = [f"{d} {_number(found[0])} {found[1]}" for d in "XYZ" if (found := image.physical_size(d)) is not None]
    lines.append(("physical sizes", ", ".join(sizes) if sizes else "none (the spatial axes declare no unit)"))
    found = image.physical_size("T")
    if found is not None:
        lines.append(("time increment", f"{_number(found[0])} {found[1]}"))
    if "C" in image.dims:
        lines.append(
            (
                "channels",
                ", ".join(
                    f"{c.name or '(unnamed)'}" + (f" #{(c.color & 0xFFFFFFFF) >> 8:06X}" if c.color is not None else "")
                    for c in image.channels
                ),
            )
        )
    if image.origin is not None:
        placed = [f"{d} {_number(image.origin[image.dims.index(d)])}" for d in "XYZ" if d in image.dims]
        lines.append(("translation", ", ".join(placed) + " (the Planes' PositionX/Y/Z)"))
    if image.not_carried:
        lines.append(
            ("not carried", "transformations " + ", ".join(image.not_carried) + " (OME-TIFF has no place for them)")
        )
    lines.append(("levels", ", ".join(f"{lv.path} ({'x'.join(map(str, lv.array.shape[-2:]))})" for lv in image.levels)))
    for path, why in image.left_out:
        lines.append(("level left out", f"{path}: {why}"))
    return lines


def _attributes(values: dict[str, Any]) -> str:
    return "".join(f" {key}={quoteattr(_xml_text(str(value)))}" for key, value in values.items())


def _xml_text(text: str) -> str:
    """The text with each character XML 1.0 cannot hold (control characters but tab and
    newlines, lone surrogates) as U+FFFD, so that a label keeps the OME-XML well-formed:
    readers take a file whose OME-XML does not parse for a plain TIFF."""
    return _NOT_XML.sub("\ufffd", text)


def _number(value: float) -> str:
    return repr(float(value)) if value != int(value) else str(int(value)) if abs(value) < 1e15 else repr(value)
