import json
import time

from schemas.wire import ContractError
from serving.responses import error_response, recover_ids


def test_ids_are_recovered_from_a_request_that_fails_its_contract() -> None:
    raw = json.dumps({"request_id": "r1", "user_id": "u1", "k": 9999}).encode()
    assert recover_ids(raw) == ("r1", "u1")


def test_nothing_is_recovered_from_broken_json_or_invalid_ids() -> None:
    assert recover_ids(b"{not json") is None
    assert recover_ids(b"[1, 2]") is None
    assert recover_ids(json.dumps({"request_id": "has space", "user_id": "u"}).encode()) is None
    assert recover_ids(json.dumps({"request_id": "r", "user_id": 7}).encode()) is None
    assert recover_ids(None) is None


def test_error_response_carries_the_code_and_a_printable_message() -> None:
    error = ContractError("SchemaViolation", "k: must be <= 500\n")
    response = error_response("r1", "u1", "invalid_request", error, time.time())
    assert response.status == "error" and response.items == []
    assert response.error is not None and response.error.code == "invalid_request"
    assert "\n" not in response.error.message


def test_ids_the_contract_refuses_are_not_recovered() -> None:
    for bad in ("r1\n", "r1\r\n", "\nr1", "r\x00", "r\u202e", "ré", "r" * 129, ""):
        raw = json.dumps({"request_id": bad, "user_id": "u1"}).encode()
        assert recover_ids(raw) is None, repr(bad)
        raw = json.dumps({"request_id": "r1", "user_id": bad}).encode()
        assert recover_ids(raw) is None, repr(bad)
