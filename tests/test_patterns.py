"""``@pattern`` matching time (luma/schema/patterns.py): patterns Python's backtracking ``re``
can take more than linear time on are found from the pattern alone, refused by the checker
(E049, tests/cases/limits/patterns.luma) and never run by the validator."""

from __future__ import annotations

import pytest

from luma.schema.patterns import matching_time
from luma.schema.validate import SchemaError, validate

EXPONENTIAL = [
    "(a+)+$", "(a*)*", "(.*)*", "((((a+)+)+)+)+", "([a-z0-9]+[-.]?)*", "(\\w+\\s?)*$",
    "(a|aa)+", "(x+x+)+y", "(a{2,5})+", "(?i)(a|A+)+",
]
POLYNOMIAL = [
    "\\d+\\d+", "a*a*a*x", "[a-z]+[a-z0-9]*", ".*x.*", "\\d+,?\\d+", "(?i)[A-Z]+[a-z]+",
    "(?=a)a+a+",
]
LINEAR = [
    "o-[0-9]+", "[a-z][a-z0-9_]*", "([a-z]+,)*[a-z]+", "[a-z]+(-[a-z]+)*", "\\d+\\.\\d+\\.\\d+",
    "^\\d+(\\.\\d+)?$", "[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}", "(ab|cd)+x?",
    "(\\+\\d{1,3})?\\d{10}", "\\d{3}-\\d{4}", "\\d{2,4}\\d{2}", "(ab)*", "(a|b)*", ".*",
    "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "([a-z]+\\.){1,50}[a-z]+",
    "(?i)abc", "[é-ü]+\\d", "(" + "|".join(f"w{i}ord" for i in range(200)) + ")+",
]


@pytest.mark.parametrize("pattern", EXPONENTIAL)
def test_exponential_patterns_are_found(pattern: str) -> None:
    found = matching_time(pattern)
    assert found.kind == "exponential"
    assert found.example and not found.is_bounded


@pytest.mark.parametrize("pattern", POLYNOMIAL)
def test_polynomial_patterns_are_found(pattern: str) -> None:
    assert matching_time(pattern).kind == "polynomial"


@pytest.mark.parametrize("pattern", LINEAR)
def test_patterns_that_read_each_text_one_way_are_linear(pattern: str) -> None:
    assert matching_time(pattern).kind == "linear"


def test_the_example_is_read_two_ways_by_re_itself() -> None:
    # "aa" fits (a+)+ as one repetition of "aa" or two of "a": re tries both on a failure
    found = matching_time("(a+)+$")
    assert found.example == "aa"
    assert found.describe('"(a+)+$"') == (
        '@pattern "(a+)+$" can take exponential time to match: a repetition in it can match '
        '"aa" in more than one way.')


def test_the_validator_does_not_run_a_refused_pattern() -> None:
    schema = {"type": "string", "pattern": "^(?:(a+)+$)$", "x-luma-pattern": "(a+)+$"}
    with pytest.raises(SchemaError, match=r"pattern '\(a\+\)\+\$' can take more than linear"):
        validate(schema, "a" * 29 + "!")


def test_the_validator_matches_a_linear_pattern() -> None:
    schema = {"type": "string", "pattern": "^(?:o-[0-9]+)$", "x-luma-pattern": "o-[0-9]+"}
    assert validate(schema, "o-12") == []
    (violation,) = validate(schema, "o-" + "1" * 100_000 + "!")
    assert "does not match the pattern 'o-[0-9]+'" in violation.message


def test_a_pattern_nested_too_deeply_for_re_is_an_error_not_a_crash() -> None:
    from luma.compile import check_text

    pattern = "(?:" * 2000 + "a" + ")" * 2000
    checked = check_text(f'schema S {{ a: string @pattern("{pattern}") }}\n', "deep.luma")
    assert [(d.code, d.message) for d in checked.diagnostics] == [(
        "E024", '@pattern "' + "(?:" * 16 + '(?..." is not a valid regular expression: its '
        "groups are nested too deeply.")]


def test_a_pattern_too_complex_to_analyse_is_refused() -> None:
    found = matching_time("(?:" * 2000 + "a" + ")" * 2000)
    assert found.kind == "unknown" and not found.is_bounded
    assert found.describe('"p"') == '@pattern "p" is too complex to be sure it matches in linear time.'
