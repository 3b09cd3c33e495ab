from schemas.model_updates import major_part, version_key


def test_versions_order_by_major_then_minor_as_numbers() -> None:
    assert sorted(["2.0", "1.10", "1.9", "10.0"], key=version_key) == ["1.9", "1.10", "2.0", "10.0"]


def test_the_major_part_names_the_full_retrain_lineage() -> None:
    assert major_part("12.3") == "12"
    assert major_part("12.3") != major_part("1.23")
