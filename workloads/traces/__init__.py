"""Shipped request traces (CSV) for `accsim serve --arrival-trace NAME`, with their
licences and sources beside them."""
