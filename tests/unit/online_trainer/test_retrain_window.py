from online_trainer.replay import RetrainWindow, retrain_window

NOW = 1_750_000_000.0


def test_without_a_change_time_the_fixed_window_is_replayed_at_once() -> None:
    assert retrain_window(NOW, 60.0, None, 40.0) == RetrainWindow(NOW - 60.0, NOW)


def test_the_change_time_is_ignored_unless_configured() -> None:
    assert retrain_window(NOW, 60.0, NOW - 15.0, None) == RetrainWindow(NOW - 60.0, NOW)


def test_a_dated_change_replays_only_the_new_regime_once_enough_of_it_exists() -> None:
    window = retrain_window(NOW, 60.0, NOW - 15.0, 40.0)
    assert window == RetrainWindow(NOW - 15.0, NOW + 25.0)


def test_enough_of_the_new_regime_already_means_no_wait() -> None:
    assert retrain_window(NOW, 600.0, NOW - 100.0, 40.0) == RetrainWindow(NOW - 100.0, NOW)


def test_the_window_still_bounds_the_replay_after_a_long_wait() -> None:
    window = retrain_window(NOW, 30.0, NOW - 5.0, 100.0)
    assert window == RetrainWindow(NOW + 65.0, NOW + 95.0)


def test_a_change_older_than_the_window_replays_the_window() -> None:
    assert retrain_window(NOW, 60.0, NOW - 600.0, 40.0) == RetrainWindow(NOW - 60.0, NOW)
