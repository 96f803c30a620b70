"""The marker a review packet's packet.json opens with: written by review.packet, and
what `accsim verify` requires before it reads the rest (review.packet_verification), so
a file of another format or a later version is refused rather than read as this one."""

from __future__ import annotations

PACKET_FORMAT = "accsim-review-packet"
PACKET_VERSION = 2
