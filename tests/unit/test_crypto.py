"""Unit tests of the encryption primitives (langgraph_stm/checkpoint/_crypto.py)."""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_stm import STMSaver
from langgraph_stm.checkpoint._crypto import (
    CIPHER_NAME,
    PLAIN_METADATA,
    Crypt,
    Keyring,
    StmCipher,
    generate_key,
    is_token,
    key_id,
    open_sealed,
    resolver_of,
    scope,
    seal,
    token_key_id,
)
from langgraph_stm.checkpoint._encoder import Encoder
from langgraph_stm.checkpoint._tables import ThreadRow
from langgraph_stm.checkpoint._threads import project
from langgraph_stm.errors import EncryptionKeyError, InvalidArgumentError


def ring() -> Keyring:
    return Keyring(generate_key())


class TestKeys:
    """Keys, key ids and key rings."""

    def test_generated_keys_are_32_random_bytes_as_base64(self) -> None:
        """generate_key returns URL-safe base64 text of 32 bytes, new each time."""
        a, b = generate_key(), generate_key()
        assert len(base64.urlsafe_b64decode(a)) == 32
        assert a != b

    def test_key_ids_name_a_key_without_being_derived_from_its_bytes_alone(self) -> None:
        """The id is stable for a key, differs between keys, and is 8 hex digits."""
        key = generate_key()
        assert key_id(key) == key_id(base64.urlsafe_b64decode(key))
        assert key_id(key) != key_id(generate_key())
        assert len(key_id(key)) == 8
        assert key_id(key) not in key

    def test_a_key_of_the_wrong_size_is_refused(self) -> None:
        with pytest.raises(InvalidArgumentError, match="32 bytes"):
            Keyring(b"short")
        with pytest.raises(InvalidArgumentError, match="32 bytes"):
            Keyring("not base64 at all!")

    def test_a_keyring_lists_the_primary_first_and_never_shows_keys(self) -> None:
        old, new = generate_key(), generate_key()
        keys = Keyring(new, old=[old, new])
        assert keys.ids == (key_id(new), key_id(old))
        assert keys.primary_id == key_id(new)
        assert new not in repr(keys)
        assert old not in repr(keys)

    def test_the_option_takes_a_key_a_keyring_or_a_callable(self) -> None:
        key = generate_key()
        assert resolver_of(key)(None).primary_id == key_id(key)
        assert resolver_of(Keyring(key))("anyone").primary_id == key_id(key)
        per_owner = resolver_of(lambda owner: key if owner == "a" else generate_key())
        assert per_owner("a").primary_id == key_id(key)
        with pytest.raises(InvalidArgumentError, match="encryption_key"):
            resolver_of(42)  # type: ignore[arg-type]


class TestSealing:
    """Sealed bytes: authenticated, bound to a thread and a purpose."""

    def test_sealed_bytes_round_trip_and_hide_the_plaintext(self) -> None:
        keys = ring()
        sealed = seal(keys, b"the secret plan", thread_id="t1", owner="acme", purpose=b"x")
        assert b"the secret plan" not in sealed
        opened = open_sealed(lambda o: keys, sealed, purpose=b"x", thread_id="t1")
        assert opened == b"the secret plan"

    def test_sealing_twice_gives_different_bytes(self) -> None:
        """A fresh nonce per seal: equal values are not recognisable in storage."""
        keys = ring()
        a = seal(keys, b"same", thread_id="t1", owner=None, purpose=b"x")
        b = seal(keys, b"same", thread_id="t1", owner=None, purpose=b"x")
        assert a != b

    def test_a_wrong_key_raises_naming_the_thread_and_key(self) -> None:
        keys, other = ring(), ring()
        sealed = seal(keys, b"data", thread_id="t1", owner=None, purpose=b"x")
        with pytest.raises(EncryptionKeyError) as caught:
            open_sealed(lambda o: other, sealed, purpose=b"x", thread_id="t1")
        assert caught.value.thread_id == "t1"
        assert caught.value.key_id == keys.primary_id
        assert "t1" in str(caught.value)

    def test_a_key_with_the_right_id_but_wrong_bytes_fails_authentication(self) -> None:
        """GCM authenticates: altered ciphertext never decrypts to garbage."""
        keys = ring()
        sealed = bytearray(seal(keys, b"data", thread_id="t1", owner=None, purpose=b"x"))
        sealed[-1] ^= 1
        with pytest.raises(EncryptionKeyError, match="does not authenticate"):
            open_sealed(lambda o: keys, bytes(sealed), purpose=b"x", thread_id="t1")

    def test_a_value_moved_to_another_thread_is_refused(self) -> None:
        keys = ring()
        sealed = seal(keys, b"data", thread_id="t1", owner=None, purpose=b"x")
        with pytest.raises(EncryptionKeyError, match="sealed for thread 't1'"):
            open_sealed(lambda o: keys, sealed, purpose=b"x", thread_id="t2")

    def test_a_value_opened_as_something_else_is_refused(self) -> None:
        """The purpose is associated data: a metadata value cannot pass as a body."""
        keys = ring()
        sealed = seal(keys, b"data", thread_id="t1", owner=None, purpose=b"meta:a")
        with pytest.raises(EncryptionKeyError):
            open_sealed(lambda o: keys, sealed, purpose=b"body", thread_id="t1")

    def test_the_owner_recorded_picks_the_key(self) -> None:
        keys = {"a": ring(), "b": ring()}
        sealed = seal(keys["b"], b"data", thread_id="t1", owner="b", purpose=b"x")
        assert open_sealed(keys.__getitem__, sealed, purpose=b"x", thread_id=None) == b"data"

    def test_without_a_key_sealed_data_raises_instead_of_returning_bytes(self) -> None:
        sealed = seal(ring(), b"data", thread_id="t1", owner=None, purpose=b"x")
        with pytest.raises(EncryptionKeyError, match="no encryption_key"):
            open_sealed(None, sealed, purpose=b"x", thread_id="t1")

    def test_old_keys_still_open_what_they_sealed(self) -> None:
        old, new = generate_key(), generate_key()
        sealed = seal(Keyring(old), b"data", thread_id="t1", owner=None, purpose=b"x")
        rotated = Keyring(new, old=[old])
        assert open_sealed(lambda o: rotated, sealed, purpose=b"x", thread_id="t1") == b"data"


class TestCipher:
    """The CipherProtocol handed to LangGraph's EncryptedSerializer."""

    def test_encrypts_for_the_thread_in_scope(self) -> None:
        keys = ring()
        cipher = StmCipher(lambda o: keys)
        with scope("t1", None):
            name, data = cipher.encrypt(b"blob")
            assert cipher.decrypt(name, data) == b"blob"
        assert name == CIPHER_NAME
        assert cipher.decrypt(name, data) == b"blob"  # the header names the thread
        with scope("t2", None), pytest.raises(EncryptionKeyError, match="t1"):
            cipher.decrypt(name, data)

    def test_refuses_to_encrypt_outside_a_write(self) -> None:
        with pytest.raises(EncryptionKeyError, match="outside"):
            StmCipher(lambda o: ring()).encrypt(b"blob")


class TestCrypt:
    """What Crypt seals in our rows and in metadata."""

    def crypt(self) -> Crypt:
        keys = ring()
        return Crypt(lambda o: keys, JsonPlusSerializer())

    def test_metadata_keeps_langgraph_keys_plain_and_seals_the_rest(self) -> None:
        crypt = self.crypt()
        metadata = {"source": "loop", "step": 3, "parents": {}, "user": "ann", "n": 7}
        sealed = crypt.seal_metadata("t1", None, metadata)
        assert {k: sealed[k] for k in ("source", "step", "parents")} == {
            "source": "loop",
            "step": 3,
            "parents": {},
        }
        assert is_token(sealed["user"])
        assert is_token(sealed["n"])
        assert "ann" not in json.dumps(sealed)
        assert crypt.open_metadata("t1", sealed) == metadata
        assert {"source", "step", "parents", "run_id"} <= PLAIN_METADATA

    def test_a_token_names_its_key(self) -> None:
        crypt = self.crypt()
        token = crypt.seal_json("t1", None, "v", b"meta:k")
        assert crypt.resolve is not None
        assert token_key_id(token) == crypt.resolve(None).primary_id

    def test_message_bodies_are_sealed_and_keep_their_digests(self) -> None:
        """Content addressing is unchanged: the digest is of the plaintext body."""
        crypt = self.crypt()
        encoder = Encoder(JsonPlusSerializer())
        messages = [HumanMessage("plan the heist", id="h1"), AIMessage("ok", id="a1")]
        write = encoder.encode("t1", "", "c1", None, {"messages": messages}, None)
        sealed = crypt.seal_write("t1", None, write)
        assert [b.digest for b in sealed.bodies] == [b.digest for b in write.bodies]
        assert all(b.type.endswith("+stm1") for b in sealed.bodies)
        assert all(b"heist" not in b.data for b in sealed.bodies)

    def test_projection_rows_are_one_token_that_opens_back(self) -> None:
        crypt = self.crypt()
        row = project("t1", "c1", "2026-01-01T00:00:00+00:00", {"goal": "rob the bank"})
        sealed = crypt.seal_row(row, None)
        assert "rob the bank" not in sealed.state
        assert (sealed.thread_id, sealed.checkpoint_id) == ("t1", "c1")
        assert crypt.open_row(sealed) == row
        plain = ThreadRow("t1", "c1", row.updated_at, 0, row.state)
        assert crypt.open_row(plain) == plain  # rows written before encryption pass

    def test_audit_entries_are_sealed(self) -> None:
        crypt = self.crypt()
        stored = crypt.seal_entry("t1", None, '{"v": 1}')
        assert json.loads(stored).startswith("$stm1:")
        assert crypt.open_entry("t1", stored) == '{"v": 1}'


class TestOption:
    """``STMSaver(encryption_key=...)``."""

    def test_without_the_option_nothing_changes(self) -> None:
        inner = InMemorySaver()
        serde = inner.serde
        saver = STMSaver(inner)
        assert inner.serde is serde
        assert saver.encrypted is False

    def test_the_inner_serde_is_langgraphs_encrypted_serializer(self) -> None:
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        inner = InMemorySaver()
        saver = STMSaver(inner, encryption_key=generate_key())
        assert isinstance(inner.serde, EncryptedSerializer)
        assert isinstance(inner.serde.cipher, StmCipher)
        assert saver.encrypted is True

    def test_reencrypt_needs_a_key(self) -> None:
        with pytest.raises(InvalidArgumentError, match="encryption_key"):
            STMSaver(InMemorySaver()).reencrypt()

    def test_importing_the_package_does_not_import_cryptography(self) -> None:
        code = "import sys, langgraph_stm; print('cryptography' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.stdout.strip() == "False", out.stderr

    def test_a_missing_extra_names_the_extra_to_install(self) -> None:
        code = (
            "import sys; sys.modules['cryptography'] = None\n"
            "from langgraph.checkpoint.memory import InMemorySaver\n"
            "from langgraph_stm import STMSaver\n"
            "from langgraph_stm.encryption import generate_key\n"
            "try:\n"
            "    STMSaver(InMemorySaver(), encryption_key=generate_key())\n"
            "except ImportError as exc:\n"
            "    print(exc, exc.__cause__ is None)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert "pip install 'langgraph-stm[encryption]'" in out.stdout, out.stderr
        assert out.stdout.strip().endswith("True")
