"""The Luma grammar, shipped as package data (``luma.lark``)."""
