"""Virtual files of the decoded tree, one module per kind: each knows its size, how to
read a range and, where writable, how to write. Nothing here knows of FUSE."""
