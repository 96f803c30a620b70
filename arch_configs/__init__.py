"""Shipped platform descriptions (YAML), installed as package data."""
