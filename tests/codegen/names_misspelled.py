"""A value of a functional-form TypedDict with a misspelled keyword key ('form' for 'from')."""

from names_types import Flight

flight: Flight = {"form": "IST", "to": "AMS", "class": "economy", "in": 1, "__private": False}
