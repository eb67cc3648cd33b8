"""The versions of an Icechunk repository (`--ref`, `--snapshot`, `/.zarrfs/versions/`,
`/.zarrfs/commit`) as a filesystem core over decoded trees of each version."""
