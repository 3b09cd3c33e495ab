from serving.read_pipeline import pack


def test_commands_are_packed_as_resp_arrays_of_bulk_strings() -> None:
    packed = pack([("GET", "k"), ("LRANGE", b"l\xff", 0, -1)])
    assert packed == (
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
        b"*4\r\n$6\r\nLRANGE\r\n$2\r\nl\xff\r\n$1\r\n0\r\n$2\r\n-1\r\n"
    )
