"""Shipped operator traces (YAML), installed as package data."""
