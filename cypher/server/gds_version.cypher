// Fails with "Unknown function 'gds.version'" when the GDS plugin is not installed.
RETURN gds.version() AS version
