"""jobs.model.table_rules: which tables a per-table setting names."""
import pytest

from jobs.model.table_rules import first_match, glob_regex, matches, setting_for


@pytest.mark.parametrize("pattern, table_id, expected", [
    ("shop.public.orders", "shop.public.orders", True),
    ("orders", "shop.public.orders", True),  # the last part, as --primary-keys always took it
    ("public.orders", "shop.public.orders", False),  # a middle part is not a name of the table
    ("shop.public.*", "shop.public.orders", True),
    ("shop.public.*", "shop.private.orders", False),
    ("*.orders", "shop.public.orders", True),  # * crosses dots
    ("shop.public.order?", "shop.public.orders", True),
    ("shop.public.order?", "shop.public.order_lines", False),
    ("shop.public.o[r]ders", "shop.public.o[r]ders", True),  # brackets and dots are literal
    ("shop.public.o[r]ders", "shop.public.orders", False),
    ("shop.public.orders", "shopXpublicXorders", False),
])
def test_a_pattern_names_a_table_by_id_last_part_or_glob(pattern, table_id, expected):
    assert matches(pattern, table_id) is expected


def test_the_most_specific_rule_wins_whatever_the_order():
    rules = [("*", "all"), ("shop.public.*", "shop"), ("orders", "last part"), ("shop.public.orders", "exact")]
    assert setting_for(rules, "shop.public.orders") == "exact"
    assert setting_for(rules[:3], "shop.public.orders") == "last part"
    assert setting_for(rules[:2], "shop.public.orders") == "all"  # globs: the first listed
    assert setting_for(rules[1:2], "other.public.x", "default") == "default"
    assert first_match([], "t") is None


def test_the_regex_is_anchored_and_java_compatible():
    assert glob_regex("a.*") == r"(?s)^a\..*$"
    assert glob_regex("x?y") == "(?s)^x.y$"
    assert matches("a*", "a\nb")  # any character, a line break too, in Python, Java and Spark alike
