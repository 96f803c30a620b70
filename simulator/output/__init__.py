"""Writing for people and files: terminal-safe text, format escapers, the one guard for
output files and folders, progress bars and lazily loaded matplotlib."""
