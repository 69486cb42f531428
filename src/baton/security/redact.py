"""Redaction: the last line between a credential and a log, a store row or a terminal.

Every canonical event, diagnostic, log line and stored request passes through a
:class:`Redactor` before it is written, so this module sits on baton's hottest path
(100k+ small events per second). The design follows from that:

* **Fast path first.** Almost every string an agent produces ("Reading src/x.py",
  a transcript chunk, a status) contains nothing secret. :meth:`Redactor.text` proves
  that with a handful of C-level substring checks on a lowercased copy plus one
  precompiled alternation of the bound secrets, and returns the input unchanged
  (~1 µs). Only strings that *could* hold a secret pay for the full scan.
* **Bound secrets above all.** The exact values of credentials bound to sessions
  (and their JSON-escaped, doubly escaped and URL-encoded spellings) are matched by a
  single compiled alternation, rebuilt only when the set changes. They are replaced
  even where no pattern would have noticed them. Values shorter than
  :data:`MIN_SECRET_LENGTH` are refused when bound: such a value matches ordinary text
  everywhere (the log becomes unreadable) and is too weak to be a real credential.
* **Patterns for the unknown.** Values after secret-looking keys (``token=``,
  ``"apiKey": "…"``, ``Authorization: Bearer …``, also inside escaped JSON), secret
  CLI flags (``--token X``), PEM private keys, JWTs, URL userinfo and well-known
  token prefixes (:data:`TOKEN_PREFIXES`).
* **One key vocabulary.** :func:`classify_key` decides for dict keys, ``key=value``
  text, flag names and ``{"name": …, "value": …}`` pairs alike, so the walker and the
  text scanner cannot disagree.
* **Closed exemptions.** Token *counts* (finite numbers under count-like keys such as
  ``input_tokens``, ``totalTokens``, ``max_tokens``) and schema ids (strings under
  ``schema``/``$schema``/``schema_version``) stay readable; nothing else is exempt.
* **Fail closed.** Unterminated quoting, a PEM block without its end, a value that is
  not JSON, nesting deeper than :data:`MAX_DEPTH` or an internal error redact the
  rest and report ``fallback=True`` so the caller can emit
  ``security.redaction_fallback``.

Length: most of it is the table of secret shapes (data); the redactor over it is one hot path that must stay in one place.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple
from urllib.parse import quote, quote_plus

from baton.errors import ConfigError
from baton.jsontypes import JsonValue

__all__ = [
    "MARKER",
    "MAX_DEPTH",
    "MIN_SECRET_LENGTH",
    "TOKEN_PREFIXES",
    "KeyClass",
    "Redacted",
    "Redactor",
    "bench_redactor",
    "classify_key",
    "secret_variants",
]


MARKER: Final = "***REDACTED***"
"""What every redacted value becomes (stable so that tests and humans can grep it)."""

MIN_SECRET_LENGTH: Final = 8
"""Shorter bound secrets are refused; see the module docstring for why."""

MAX_HELD_CHARS: Final = 8 * 1024
"""Streamed text held back at most this long (then shown, redacted as it stands)."""

STREAM_CONTEXT_CHARS: Final = 1024
"""How much of the shown part of a line later pieces of streamed text see."""

MAX_FALLBACK_REASONS: Final = 64
"""Undrained fallback reasons beyond this many are forgotten, oldest first."""

MAX_DEPTH: Final = 64
"""Deeper JSON values are redacted whole (fail closed) instead of recursed into."""

_KEY_CACHE_MAX = 4096
_MAX_PASSES = 8

# --------------------------------------------------------------------------- vocabulary

_SECRET_COMPOUNDS: Final = (
    "apikey",
    "privatekey",
    "secretkey",
    "accesskey",
    "signingkey",
    "encryptionkey",
    "masterkey",
    "accountkey",
    "sessionkey",
    "clientkey",
    "authkey",
    "password",
    "passwd",
    "passphrase",
    "secret",
    "credential",
    "creds",
    "cookie",
    "authorization",
    "bearer",
    "connectionstring",
    "connstr",
    "jwt",
    "tokenvalue",
    "authcode",
    "authheader",
)
"""A key is secret-looking when its words, joined, contain one of these."""

_SECRET_SUFFIXES: Final = ("token", "tokens", "pwd", "auth", "dsn")
"""...or when the joined words end with one of these (``GITHUB_TOKEN``, ``proxyAuth``)."""

_SECRET_WORDS: Final = frozenset({"sig", "pw"})
"""...or when the whole key is one of these (``sig=`` of Azure SAS URLs, ``pw=``)."""

_FLAG_SUFFIXES: Final = ("key", "pass")
"""Flags are terser than keys: ``--key X`` and ``--pass X`` carry secrets too."""

_COUNT_WORDS: Final = frozenset(
    {
        "tokens",
        "count",
        "counts",
        "usage",
        "used",
        "size",
        "limit",
        "max",
        "min",
        "total",
        "remaining",
        "length",
        "budget",
        "window",
    }
)
"""Finite numbers under a key with one of these words are counts, never secrets."""

_SCHEMA_KEYS: Final = frozenset(
    {"schema", "$schema", "schema_id", "schemaId", "schema_version", "schemaVersion"}
)
"""Schema ids stay readable even inside a secret-looking object."""

_HEADER_KEYS: Final = frozenset({"authorization", "proxyauthorization", "cookie", "setcookie"})
"""Header-like keys whose bare value runs to the end of the line (``Bearer x``, ``a=b; c=d``)."""

_AUTH_SCHEMES: Final = ("bearer", "basic", "token", "digest", "negotiate", "ntlm", "apikey")

TOKEN_PREFIXES: Final[tuple[tuple[str, str], ...]] = (
    # (exact-case literal prefix, regex for the whole token) — one row per family. A row
    # whose literal ends in '-', '_' or '.' is gated by that character (cheap); the others
    # are confirmed by their regex on the fast path (see ``_may_match_pattern``).
    # -- AI providers
    ("sk-", r"sk-[A-Za-z0-9_\-]{16,}"),  # OpenAI, Anthropic (sk-ant-…), OpenRouter, DeepSeek …
    ("gsk_", r"gsk_[A-Za-z0-9]{40,}"),  # Groq
    ("r8_", r"r8_[A-Za-z0-9]{30,}"),  # Replicate
    ("pplx-", r"pplx-[A-Za-z0-9]{40,}"),  # Perplexity
    ("xai-", r"xai-[A-Za-z0-9]{50,}"),  # xAI
    ("hf_", r"hf_[A-Za-z0-9]{30,}"),  # Hugging Face user token
    ("api_org_", r"api_org_[A-Za-z0-9]{30,}"),  # Hugging Face org token
    # -- payments and messaging
    ("sk_", r"sk_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe secret keys (also Clerk)
    ("rk_", r"rk_(?:live|test)_[A-Za-z0-9]{10,}"),  # Stripe restricted keys
    ("whsec_", r"whsec_[A-Za-z0-9+/=]{20,}"),  # Stripe webhook signing secret
    ("SK", r"SK[0-9a-fA-F]{32}"),  # Twilio API key
    ("SG.", r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}"),  # SendGrid
    ("key-", r"key-[0-9a-f]{32}"),  # Mailgun
    ("sq0atp-", r"sq0atp-[A-Za-z0-9_\-]{22,}"),  # Square access token (legacy)
    ("sq0csp-", r"sq0csp-[A-Za-z0-9_\-]{40,}"),  # Square OAuth secret
    ("EAAA", r"EAAA[A-Za-z0-9_\-]{60,}"),  # Square access token
    *((f"xox{c}-", rf"xox{c}-[A-Za-z0-9\-]{{10,}}") for c in "abposre"),  # Slack tokens
    ("xapp-", r"xapp-[0-9]-[A-Za-z0-9\-]{10,}"),  # Slack app-level token
    # -- code hosting and package registries
    ("ghp_", r"ghp_[A-Za-z0-9]{20,}"),  # GitHub classic PAT
    ("gho_", r"gho_[A-Za-z0-9]{20,}"),  # GitHub OAuth
    ("ghu_", r"ghu_[A-Za-z0-9]{20,}"),  # GitHub user-to-server
    ("ghs_", r"ghs_[A-Za-z0-9]{20,}"),  # GitHub server-to-server
    ("ghr_", r"ghr_[A-Za-z0-9]{20,}"),  # GitHub refresh
    ("github_pat_", r"github_pat_[A-Za-z0-9_]{20,}"),  # GitHub fine-grained PAT
    ("glpat-", r"glpat-[A-Za-z0-9_\-]{20,}"),  # GitLab PAT
    ("gldt-", r"gldt-[A-Za-z0-9_\-]{20,}"),  # GitLab deploy token
    ("glrt-", r"glrt-[A-Za-z0-9_\-]{20,}"),  # GitLab runner token
    ("glptt-", r"glptt-[A-Za-z0-9_\-]{20,}"),  # GitLab pipeline trigger token
    ("ATBB", r"ATBB[A-Za-z0-9]{28,}"),  # Bitbucket app password
    ("ATATT3", r"ATATT3[A-Za-z0-9_\-=]{100,}"),  # Atlassian API token
    ("npm_", r"npm_[A-Za-z0-9]{36}"),  # npm
    ("pypi-", r"pypi-[A-Za-z0-9_\-]{50,}"),  # PyPI upload token
    ("rubygems_", r"rubygems_[0-9a-f]{48}"),  # RubyGems
    ("oy2", r"oy2[a-z0-9]{43}"),  # NuGet
    ("dckr_pat_", r"dckr_pat_[A-Za-z0-9_\-]{20,}"),  # Docker Hub
    # -- cloud
    ("AKIA", r"AKIA[0-9A-Z]{16}"),  # AWS access key id
    ("ASIA", r"ASIA[0-9A-Z]{16}"),  # AWS temporary access key id
    ("AIza", r"AIza[0-9A-Za-z_\-]{35}"),  # Google API key
    ("ya29.", r"ya29\.[0-9A-Za-z_\-]{20,}"),  # Google OAuth access token
    ("GOCSPX-", r"GOCSPX-[A-Za-z0-9_\-]{20,}"),  # Google OAuth client secret
    ("LTAI", r"LTAI[A-Za-z0-9]{12,20}"),  # Alibaba Cloud access key id
    ("dop_v1_", r"dop_v1_[0-9a-f]{64}"),  # DigitalOcean PAT
    ("doo_v1_", r"doo_v1_[0-9a-f]{64}"),  # DigitalOcean OAuth
    ("dor_v1_", r"dor_v1_[0-9a-f]{64}"),  # DigitalOcean refresh
    ("dapi", r"dapi[0-9a-f]{32}(?:-[0-9]+)?"),  # Databricks
    ("hvs.", r"hvs\.[A-Za-z0-9_\-]{24,}"),  # HashiCorp Vault service token
    ("hvb.", r"hvb\.[A-Za-z0-9_\-]{24,}"),  # HashiCorp Vault batch token
    ("dp.", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),  # Doppler
    ("HRKU-", r"HRKU-[A-Za-z0-9_\-]{20,}"),  # Heroku
    ("fo1_", r"fo1_[A-Za-z0-9_\-]{40,}"),  # Fly.io
    ("nfp_", r"nfp_[A-Za-z0-9]{36,}"),  # Netlify
    ("sbp_", r"sbp_[0-9a-f]{40}"),  # Supabase
    ("pscale_", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.]{32,}"),  # PlanetScale
    ("pul-", r"pul-[0-9a-f]{40}"),  # Pulumi
    ("tskey-", r"tskey-[A-Za-z0-9\-]{20,}"),  # Tailscale
    ("dt0c01.", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}"),  # Dynatrace
    # -- SaaS and tools
    ("shpat_", r"shpat_[0-9a-fA-F]{32}"),  # Shopify access token
    ("shpss_", r"shpss_[0-9a-fA-F]{32}"),  # Shopify shared secret
    ("shpca_", r"shpca_[0-9a-fA-F]{32}"),  # Shopify custom app token
    ("shppa_", r"shppa_[0-9a-fA-F]{32}"),  # Shopify private app token
    ("lin_api_", r"lin_api_[A-Za-z0-9]{40}"),  # Linear
    ("ntn_", r"ntn_[A-Za-z0-9]{40,}"),  # Notion
    ("secret_", r"secret_[A-Za-z0-9]{43}"),  # Notion (legacy integration secret)
    ("PMAK-", r"PMAK-[0-9a-f]{24}-[0-9a-f]{34}"),  # Postman
    ("glsa_", r"glsa_[A-Za-z0-9]{32}_[0-9a-f]{8}"),  # Grafana service account
    ("glc_", r"glc_[A-Za-z0-9+/]{32,}={0,2}"),  # Grafana Cloud
    ("sntrys_", r"sntrys_[A-Za-z0-9+/=_\-]{40,}"),  # Sentry org token
    ("sntryu_", r"sntryu_[0-9a-f]{64}"),  # Sentry user token
    ("NRAK-", r"NRAK-[A-Z0-9]{27}"),  # New Relic user key
    ("figd_", r"figd_[A-Za-z0-9_\-]{40,}"),  # Figma
    ("ops_", r"ops_eyJ[A-Za-z0-9+/=_\-.]{20,}"),  # 1Password service account
    ("aio_", r"aio_[A-Za-z0-9]{28}"),  # Adafruit IO
    ("sl.", r"sl\.[A-Za-z0-9_\-]{100,}"),  # Dropbox short-lived token
    ("rdme_", r"rdme_[a-z0-9]{70}"),  # ReadMe
    ("pnu_", r"pnu_[A-Za-z0-9]{36}"),  # Prefect
    ("sgp_", r"sgp_[A-Za-z0-9_]{40,}"),  # Sourcegraph
    ("AGE-SECRET-KEY-", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),  # age encryption key
)
"""Well-known credential prefixes, matched anywhere (not after a letter or digit)."""

_KEYWORDS: Final = (
    "token",
    "secret",
    "pass",
    "pwd",
    "cred",
    "cookie",
    "auth",
    "bearer",
    "key",
    "jwt",
    "conn",
    "dsn",
    "sig",
    "pw",
)
"""Words that start a ``key=value`` candidate; :func:`classify_key` has the last word."""


# ---------------------------------------------------------------------- key classes


class KeyClass(NamedTuple):
    """How a key (dict key, ``key=`` in text, flag name) affects its value."""

    secret: bool
    """Strings under it are redacted; numbers too unless ``count``."""
    counts: bool
    """Finite numbers under it are counts (``input_tokens``) and stay."""
    schema: bool
    """A schema-id key: its string stays (after text redaction) even in a secret object."""
    header: bool
    """A header-like key: a bare value runs to the end of the line."""


_WORD_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_RE.findall(key)]


def classify_key(key: str, *, flag: bool = False) -> KeyClass:
    """Classify a key by its words (snake, camel, kebab and UPPER forms alike).

    ``flag=True`` is for command-line flag names, where a bare ``key``/``pass``/
    ``auth`` suffix also marks a secret.
    """
    words = _words(key)
    joined = "".join(words)
    secret = (
        any(c in joined for c in _SECRET_COMPOUNDS)
        or joined.endswith(_SECRET_SUFFIXES)
        or joined in _SECRET_WORDS
    )
    if flag and not secret:
        secret = joined.endswith(_FLAG_SUFFIXES)
    count = any(w in _COUNT_WORDS for w in words)
    return KeyClass(
        secret=secret,
        counts=count,
        schema=key in _SCHEMA_KEYS,
        header=joined in _HEADER_KEYS,
    )


_NOT_A_KEY = KeyClass(secret=False, counts=False, schema=False, header=False)


# ------------------------------------------------------------------------ variants


def secret_variants(secret: str) -> tuple[str, ...]:
    """The spellings under which a bound secret may appear in text.

    Raw, JSON-escaped (also with ``\\/``), doubly JSON-escaped, and URL-encoded
    (``quote``/``quote_plus``, upper- and lowercase hex). Deduplicated, longest first.
    """
    json_once = json.dumps(secret, ensure_ascii=False)[1:-1]
    json_ascii = json.dumps(secret)[1:-1]
    json_twice = json.dumps(json_once, ensure_ascii=False)[1:-1]
    candidates = {
        secret,
        json_once,
        json_ascii,
        json_once.replace("/", "\\/"),
        json_twice,
        quote(secret, safe=""),
        quote_plus(secret, safe=""),
    }
    for encoded in (quote(secret, safe=""), quote_plus(secret, safe="")):
        candidates.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), encoded))
    return tuple(sorted((c for c in candidates if c), key=lambda c: (-len(c), c)))


# ------------------------------------------------------------------------- patterns
#
# The scanner is trigger-driven: each row of the trigger table is a lowercase literal
# found with ``str.find`` (C speed) plus an *anchored* regex run only where the literal
# occurs. A single unanchored alternation of every pattern costs ~10 µs per short string
# in ``re`` (every position tries every branch); this costs ~nothing when no trigger
# occurs, and the fast path is the same table's ``in`` checks.

_ID_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-$")
_TOKEN_CHARS: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

_PEM_BEGIN = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re.compile(r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*")
_USERINFO = re.compile(r"[^\s/?#@\"'\\<>]+(?=@)")
_BEARER = re.compile(r"(?:[Bb]earer|BEARER)[ \t]+(?=[A-Za-z0-9._~+/\-]*[0-9._~+/\-])")
_BEARER_VALUE = re.compile(r"[A-Za-z0-9._~+/\-]{8,}=*")
_FLAG = re.compile(
    r"--(?P<name>[A-Za-z0-9][A-Za-z0-9_\-]*)(?:\\*[\"'])?(?:[ \t]*[=,][ \t]*|[ \t]+)"
    r"(?P<open>\\*[\"'])?"
)
_KV_TAIL = re.compile(r"[A-Za-z0-9_.\-]*(?:\\*[\"'])?[ \t]*[:=][ \t]*(?P<open>\\*[\"'])?")
_BARE_VALUE = re.compile(r"[^\s\"'\\,;&<>()\[\]{}]+")
_LINE_VALUE = re.compile(r"[^\r\n\"'\\]+")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SCHEME = re.compile(r"(?i:" + "|".join(_AUTH_SCHEMES) + r")[ \t]+")
_PREFIX_RES: Final = tuple((t, re.compile(rx)) for t, rx in TOKEN_PREFIXES)

_SLASH = r"\\*/"  # a path separator, also JSON-escaped (``\/``)
_URL_SECRETS: Final = tuple(
    re.compile(rx, re.IGNORECASE)
    for rx in (
        # (the fixed, public part of the URL)(?P<secret>the part that is the credential)
        rf"hooks\.slack\.com{_SLASH}(?:services|workflows|triggers){_SLASH}"
        rf"(?P<secret>[A-Za-z0-9_\-]+(?:{_SLASH}[A-Za-z0-9_\-]+)*)",
        rf"(?:discord|discordapp)\.com{_SLASH}api(?:{_SLASH}v[0-9]+)?{_SLASH}webhooks{_SLASH}"
        rf"(?P<secret>[0-9]+{_SLASH}[A-Za-z0-9_\-]+)",
        rf"\.webhook\.office\.com{_SLASH}webhookb2{_SLASH}(?P<secret>[^\s\"'<>\\]+(?:{_SLASH}[^\s\"'<>\\/]+)*)",
        rf"outlook\.office(?:365)?\.com{_SLASH}webhook{_SLASH}(?P<secret>[^\s\"'<>\\]+(?:{_SLASH}[^\s\"'<>\\/]+)*)",
        rf"hooks\.zapier\.com{_SLASH}hooks{_SLASH}catch{_SLASH}(?P<secret>[0-9]+{_SLASH}[A-Za-z0-9]+)",
        rf"maker\.ifttt\.com{_SLASH}(?:trigger{_SLASH}[^/\s]+{_SLASH}with{_SLASH})?key{_SLASH}"
        rf"(?P<secret>[A-Za-z0-9_\-]+)",
        rf"{_SLASH}hooks{_SLASH}(?P<secret>[a-z0-9]{{26}})(?![A-Za-z0-9])",  # Mattermost
    )
)
"""Webhook URLs whose path is the credential (Slack, Discord, Teams, Zapier, IFTTT,
Mattermost): the host and fixed path stay readable, the rest is redacted."""

_SHAPES: Final = (
    # (gate literal, regex whose ``secret`` group, or whole match, is the credential)
    ("~", re.compile(r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_.\-]{3}[0-9]Q~[A-Za-z0-9_.~\-]{31,34}")),
    (":AA", re.compile(r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])")),
    ("-us", re.compile(r"(?<![0-9a-fA-F])[0-9a-f]{32}-us[0-9]{1,2}(?![0-9])")),
    (".atlasv1.", re.compile(r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-]{60,}")),
    ("1//0", re.compile(r"(?<![A-Za-z0-9])1//0[A-Za-z0-9_\-]{40,}")),
)
"""Tokens without a leading prefix: Azure AD client secrets (``…8Q~…``), Telegram bot
tokens, Mailchimp keys (``…-us6``), Terraform Cloud tokens, Google refresh tokens."""

_PUTTY = re.compile(r"Private-Lines:[ \t]*[0-9]+")
_PUTTY_END = re.compile(r"Private-MAC:[ \t]*[0-9a-fA-F]*")

_BLOCKS: Final = (("-----BEGIN", _PEM_BEGIN, _PEM_END), ("Private-Lines", _PUTTY, _PUTTY_END))
"""Multi-line secrets: (literal, start, end). Streamed text waits for their end."""


def _open_block(s: str, stop: int) -> re.Match[str] | None:
    """The last multi-line secret that starts in ``s[:stop]`` and has not ended in ``s``."""
    found: re.Match[str] | None = None
    for literal, start, end in _BLOCKS:
        at = s.rfind(literal, 0, stop)
        if at < 0:
            continue
        m = start.match(s, at)
        open_ = m is not None and end.search(s, m.end()) is None
        if open_ and m is not None and (found is None or m.start() > found.start()):
            found = m
    return found


_ASCII_LOWER: Final = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


# Fast-path triggers. Every pattern above needs one of these to be present: literal
# ``in`` checks (C speed, ~25 ns each) for the JWT/Bearer markers and the prefixes
# without a gate character; per gate character ('-', '_'), one regex of fixed-width
# lookbehinds that ``re`` runs only when that character occurs; a loop over the dots
# for dot-gated prefixes; and the case-insensitive keywords only when a separator is
# present. ``re`` alternations of literals cost ~15 ns per character of text, far more
# than a handful of ``in`` checks, so none is used on this path.
_CONFIRMED: Final = tuple((t, rx) for t, rx in _PREFIX_RES if t[-1] not in "-_.")
"""Prefix rows without a gate character (``AKIA``, ``SK``…)."""
_UNGATED: Final = (
    "eyJ",  # JWT
    "earer",  # Bearer / bearer
    "EARER",  # BEARER
    *(t for t, _ in _CONFIRMED),
)

_GATED: Final = {char: tuple((t, rx) for t, rx in _PREFIX_RES if t[-1] == char) for char in "-_."}
"""Prefix rows by their gate character (the last character of their literal)."""


def _lookbehind_gate(
    char: str, literals: Iterable[str], extra: Iterable[str] = ()
) -> re.Pattern[str]:
    alternatives = [f"(?<={re.escape(t)})" for t in literals if t[-1] == char]
    return re.compile(re.escape(char) + "(?:" + "|".join([*alternatives, *extra]) + ")")


_PREFIX_LITERALS: Final = tuple(t for t, _ in TOKEN_PREFIXES)
_GATES: Final = {
    "-": _lookbehind_gate("-", ("--", *_PREFIX_LITERALS), ("(?<=Private-)", "(?=us[0-9])")),
    "_": _lookbehind_gate("_", _PREFIX_LITERALS),
    ".": _lookbehind_gate(".", _PREFIX_LITERALS, ("(?=atlasv1\\.)",)),
}
_DASH_RE, _UNDERSCORE_RE = _GATES["-"], _GATES["_"]
_DOT_ENDINGS: Final = frozenset(t[-3:-1] for t, _ in _PREFIX_RES if t[-1] == ".")
"""The two characters before the dot of every dot-gated prefix (``SG.`` → ``SG``)."""


def _dot_gate(s: str) -> bool:
    """Is some dot the end of a dot-gated prefix, or the start of ``.atlasv1.``?

    A loop over the dots beats a regex of lookbehinds here: text has few dots, and
    ``re`` pays per position for an alternation.
    """
    i = s.find(".")
    while i >= 0:
        if s[i - 2 : i] in _DOT_ENDINGS or s.startswith("atlasv1.", i + 1):
            return True
        i = s.find(".", i + 1)
    return False


_SEPARATED: Final = (*_KEYWORDS, "://", ":\\/\\/")


def _may_match_pattern(s: str) -> bool:
    """Cheap necessary condition for :meth:`Redactor._scan` to find anything."""
    for t in _UNGATED:
        if t in s:
            return True
    if "-" in s and _DASH_RE.search(s) is not None:
        return True
    if "_" in s and _UNDERSCORE_RE.search(s) is not None:
        return True
    if "." in s and _dot_gate(s):
        return True
    if "/" in s and ("ook" in s or "OOK" in s or "fttt" in s or "1//0" in s):
        return True
    if "~" in s and "Q~" in s:
        return True
    if ":" in s or "=" in s:
        if ":AA" in s:
            return True
        low = s.lower()
        for t in _SEPARATED:
            if t in low:
                return True
    return False


def _find_all(low: str, trigger: str) -> Iterator[int]:
    i = low.find(trigger)
    while i >= 0:
        yield i
        i = low.find(trigger, i + 1)


# ------------------------------------------------------------------------- results


class Redacted(NamedTuple):
    """A redacted value plus what happened, for ``security.redaction_fallback``."""

    value: Any
    redacted: bool
    fallback: bool
    reasons: tuple[str, ...] = ()


@dataclass(slots=True)
class _Flags:
    redacted: bool = False
    fallback: bool = False
    reasons: list[str] = field(default_factory=list)

    def fail(self, reason: str) -> None:
        self.redacted = True
        self.fallback = True
        if reason not in self.reasons and len(self.reasons) < 8:
            self.reasons.append(reason)


Span = tuple[int, int]

# ------------------------------------------------------------------------ redactor


class Redactor:
    """Redacts text and JSON values; cheap when there is nothing to redact.

    One instance is shared by the runner; :meth:`bind` adds the credentials of a new
    session (the secret matcher is rebuilt, and swapped in by one assignment, only
    then). Safe to share between threads: state is replaced, never mutated in place,
    except the bounded key-classification cache.
    """

    __slots__ = (
        "_clean_keys",
        "_fallbacks",
        "_key_cache",
        "_secret_firsts",
        "_secret_literals",
        "_secret_longest",
        "_secret_prefixes",
        "_secret_re",
        "_secrets",
    )

    def __init__(self, bound_secrets: Iterable[str] = ()) -> None:
        self._secrets: frozenset[str] = frozenset()
        self._secret_re: re.Pattern[str] | None = None
        self._secret_literals: tuple[str, ...] | None = None
        self._secret_prefixes: frozenset[str] = frozenset()
        """Every proper prefix of every spelling of a bound secret (for streaming)."""
        self._secret_firsts: frozenset[str] = frozenset()
        self._secret_longest = 0
        self._fallbacks: deque[str] = deque(maxlen=MAX_FALLBACK_REASONS)
        self._key_cache: dict[str, KeyClass] = {}
        self._clean_keys: set[str] = set()
        """Object keys already known to hold nothing to redact (keys repeat a lot)."""
        self.bind(bound_secrets)

    # -- binding

    @property
    def secret_count(self) -> int:
        """How many distinct secrets are bound (their values are never exposed)."""
        return len(self._secrets)

    def bind(self, secrets: Iterable[str]) -> None:
        """Add bound secrets; raises :class:`ConfigError` for one that is too short."""
        new = set(self._secrets)
        for i, secret in enumerate(secrets):
            if not isinstance(secret, str):
                raise ConfigError(f"bound secret #{i + 1} is not a string")
            if len(secret) < MIN_SECRET_LENGTH:
                raise ConfigError(
                    f"bound secret #{i + 1} is shorter than {MIN_SECRET_LENGTH} characters: "
                    "a value that short would match ordinary text everywhere and is too weak "
                    "to be a real credential"
                )
            new.add(secret)
        if new == self._secrets:
            return
        variants: set[str] = set()
        for secret in new:
            variants.update(secret_variants(secret))
        ordered = sorted(variants, key=lambda v: (-len(v), v))
        # Few literals: C-level ``in`` checks beat the regex as a pre-check; the regex
        # (longest first) always does the replacing.
        self._secret_literals = tuple(ordered) if len(ordered) <= 16 else None
        self._secret_re = re.compile("|".join(re.escape(v) for v in ordered))
        self._secret_prefixes = frozenset(v[:n] for v in ordered for n in range(1, len(v)))
        self._secret_firsts = frozenset(v[0] for v in ordered)
        self._secret_longest = len(ordered[0])
        self._secrets = frozenset(new)
        self._key_cache = {}
        self._clean_keys = set()

    def _has_secret(self, s: str) -> bool:
        literals = self._secret_literals
        if literals is not None:
            for lit in literals:  # noqa: SIM110 - a plain loop is ~2x faster than any(<genexpr>)
                if lit in s:
                    return True
            return False
        secret_re = self._secret_re
        return secret_re is not None and secret_re.search(s) is not None

    # -- text

    def text(self, s: str) -> str:
        """Redact a string; returns the very same object when nothing matched."""
        if len(s) < 5 or (not self._has_secret(s) and not _may_match_pattern(s)):
            return s
        flags = _Flags()
        out = self._text_slow(s, flags)
        if flags.fallback:
            self._fallbacks.extend(flags.reasons)
        return out

    def text_checked(self, s: str) -> Redacted:
        """Like :meth:`text`, also telling whether anything was redacted or fell back."""
        flags = _Flags()
        out = self._text_into(s, flags)
        return Redacted(out, flags.redacted, flags.fallback, tuple(flags.reasons))

    def _text_into(self, s: str, flags: _Flags) -> str:
        if len(s) < 5 or (not self._has_secret(s) and not _may_match_pattern(s)):
            return s
        return self._text_slow(s, flags)

    def _text_slow(self, s: str, flags: _Flags) -> str:
        try:
            secret_re = self._secret_re
            if secret_re is not None:
                replaced = secret_re.sub(MARKER, s)
                if replaced != s:
                    flags.redacted = True
                    s = replaced
            # A replacement changes its neighbours' context (``ghp_…--token x`` only reads
            # as a flag once the token before it is gone), so scan to a fixed point: that
            # makes redaction idempotent. Each pass only replaces text by the marker.
            for _ in range(_MAX_PASSES):
                if not _may_match_pattern(s):
                    return s
                spans = self._scan(s, flags)
                if not spans:
                    return s
                flags.redacted = True
                s = _splice(s, spans)
            flags.fail("redaction did not settle; value hidden")
            return MARKER
        except Exception as exc:  # fail closed: an unexpected failure hides the whole string
            flags.fail(f"text redaction failed ({type(exc).__name__}); value hidden")
            return MARKER

    def _scan(self, s: str, flags: _Flags) -> list[Span]:
        """Spans of ``s`` to replace by :data:`MARKER` (unsorted, may overlap)."""
        low = s.lower() if s.isascii() else s.translate(_ASCII_LOWER)
        spans: list[Span] = []
        add = spans.append
        separated = ":" in s or "=" in s
        dashed = "-" in s
        for kw in _KEYWORDS if separated else ():
            for i in _find_all(low, kw):
                span = self._key_value(s, i, i + len(kw), flags)
                if span is not None:
                    add(span)
        if dashed and "-----BEGIN" in s:
            for i in _find_all(s, "-----BEGIN"):
                m = _PEM_BEGIN.match(s, i)
                if m is None:
                    continue
                end = _PEM_END.search(s, m.end())
                if end is None:
                    flags.fail("PEM private key without its END line; rest of the text hidden")
                    add((i, len(s)))
                    break
                add((i, end.end()))
        if dashed and "--" in s:
            for i in _find_all(s, "--"):
                if i > 0 and s[i - 1] in _TOKEN_CHARS:
                    continue
                span = self._flag(s, i, flags)
                if span is not None:
                    add(span)
        if separated and "://" in s:
            for i in _find_all(s, "://"):
                m = _USERINFO.match(s, i + 3)
                if m is not None and m.group(0) != MARKER:
                    add(m.span())
        if separated and ":\\/\\/" in s:  # JSON-escaped URL: scheme:\/\/user:pass@host
            for i in _find_all(s, ":\\/\\/"):
                m = _USERINFO.match(s, i + 5)
                if m is not None and m.group(0) != MARKER:
                    add(m.span())
        if "eyJ" in s:
            for i in _find_all(s, "eyJ"):
                if i > 0 and s[i - 1] in _TOKEN_CHARS:
                    continue
                m = _JWT.match(s, i)
                if m is not None:
                    add(m.span())
        if "earer" in s or "EARER" in s:
            for m in _BEARER.finditer(s):
                v = _BEARER_VALUE.match(s, m.end())
                if v is not None:
                    add(v.span())
        for char, rows in _GATED.items():
            if char not in s:
                continue
            for gate in _GATES[char].finditer(s):
                at = gate.start() + 1
                for trigger, rx in rows:
                    i = at - len(trigger)
                    if i >= 0 and s.startswith(trigger, i):
                        self._prefixed(s, i, rx, add)
        for trigger, rx in _CONFIRMED:
            if trigger in s:
                for i in _find_all(s, trigger):
                    self._prefixed(s, i, rx, add)
        if "/" in s and ("ook" in low or "fttt" in low):
            for rx in _URL_SECRETS:
                for m in rx.finditer(s):
                    if m.group("secret") != MARKER:
                        add(m.span("secret"))
        for trigger, rx in _SHAPES:
            if trigger in s:
                for m in rx.finditer(s):
                    add(m.span())
        if dashed and "Private-Lines" in s:
            for m in _PUTTY.finditer(s):
                end = _PUTTY_END.search(s, m.end())
                stop = len(s) if end is None else end.start()
                if s[m.end() : stop].strip() in ("", MARKER):
                    continue  # already redacted: the MAC line itself is no secret
                if end is None:
                    flags.fail("PuTTY private key without its MAC line; rest of the text hidden")
                    add((m.end(), len(s)))
                    break
                add((m.end(), stop))
        return spans

    @staticmethod
    def _prefixed(s: str, i: int, rx: re.Pattern[str], add: Callable[[Span], None]) -> None:
        """A prefixed token at ``i``, unless it is glued to a word on either side."""
        if i > 0 and (s[i - 1].isalnum() or s[i - 1] == "_"):
            return
        m = rx.match(s, i)
        if m is not None and not (m.end() < len(s) and s[m.end()].isalnum()):
            add(m.span())

    def _key_value(self, s: str, kw_start: int, kw_end: int, flags: _Flags) -> Span | None:
        m = _KV_TAIL.match(s, kw_end)
        if m is None:
            return None
        key_end = kw_end + _ident_len(s, kw_end)
        start = kw_start
        while start > 0 and s[start - 1] in _ID_CHARS:
            start -= 1
        cls = self._classify(s[start:key_end])
        if not cls.secret:
            return None
        return self._value(s, m.end(), m.group("open") or "", cls, flags, flag=False)

    def _flag(self, s: str, i: int, flags: _Flags) -> Span | None:
        m = _FLAG.match(s, i)
        if m is None:
            return None
        cls = self._classify(m.group("name"), flag=True)
        if not cls.secret:
            return None
        return self._value(s, m.end(), m.group("open") or "", cls, flags, flag=True)

    def _value(
        self, s: str, at: int, quote_: str, cls: KeyClass, flags: _Flags, *, flag: bool
    ) -> Span | None:
        if quote_:
            close = s.find(quote_, at)
            if close < 0:
                if s[at:] in ("", MARKER):
                    return None
                flags.fail("unterminated quoted secret value; rest of the text hidden")
                return at, len(s)
            value = s[at:close]
            end = close
        else:
            if flag and s.startswith("-", at):
                return None  # the next argument is another flag, not a value
            vm = (_LINE_VALUE if cls.header else _BARE_VALUE).match(s, at)
            if vm is None:
                return None
            value = vm.group(0).rstrip()
            end = at + len(value)
            if value in ("null", "true", "false", "None"):
                return None
        if not value or value == MARKER:
            return None
        if cls.counts and _NUMBER.fullmatch(value):
            return None
        if cls.header:
            scheme = _SCHEME.match(s, at, end)
            if scheme is not None:
                if s[scheme.end() : end] in ("", MARKER):
                    return None
                at = scheme.end()
        return at, end

    def _classify(self, key: str, *, flag: bool = False) -> KeyClass:
        cache_key = "--" + key if flag else key
        cls = self._key_cache.get(cache_key)
        if cls is None:
            cls = classify_key(key, flag=flag)
            if len(self._key_cache) >= _KEY_CACHE_MAX:
                self._key_cache = {}
            self._key_cache[cache_key] = cls
        return cls

    # -- JSON values

    def value(self, v: JsonValue) -> JsonValue:
        """Redact a JSON value (containers are copied; unchanged strings are reused)."""
        flags = _Flags()
        out = self._walk(v, _NOT_A_KEY, flags, 0)
        if flags.fallback:
            self._fallbacks.extend(flags.reasons)
        return out

    def drain_fallbacks(self) -> list[str]:
        """Why redaction fell back (hid more than a match) since the last call.

        :meth:`text` and :meth:`value` fail closed silently; whoever emits events
        drains this after each unit of work and makes every fallback a visible
        ``security.redaction_fallback``. Reasons are fixed phrases: they never quote
        the text (nor any path) they were about.
        """
        out: list[str] = []
        fallbacks = self._fallbacks
        while fallbacks:
            out.append(fallbacks.popleft())
        return out

    def preview(self, text: str, limit: int, *, whole: bool = True) -> str:
        """The end of ``text`` as a bounded diagnostic preview (stderr of an agent).

        Redacted as a whole first, so a secret that the limit would cut in two is still
        found; then the last ``limit`` bytes, starting at a line start, so no part of a
        line cut by the limit is shown. ``whole=False``: ``text`` itself starts mid-stream
        (a ring buffer that wrapped), so its first line is partial and never shown.
        A cut is marked with a leading ``…``.
        """
        redacted = self.text(text)
        cut = not whole
        if not whole:
            newline = redacted.find("\n")
            redacted = redacted[newline + 1 :] if newline >= 0 else ""
        data = redacted.encode("utf-8", errors="surrogatepass")
        if len(data) > limit:
            cut = True
            redacted = data[-limit:].decode("utf-8", errors="ignore")
            newline = redacted.find("\n")
            redacted = redacted[newline + 1 :] if newline >= 0 else ""
        return "…" + redacted if cut else redacted

    # -- streaming

    def stream_cut(self, pending: str, context: str = "") -> int:
        """How much of streamed ``pending`` text may be shown now, before more arrives.

        ``context`` is the already shown part of the current line (it can no longer be
        held). Held back, until the next piece or the end of the message: a suffix that
        could be the start of a bound secret (so a credential split across chunks is
        still found whole); the last, unfinished word (it may be the start of a
        token); and the whole unfinished line when it holds anything a pattern
        could match (``password:`` now, its value in the next chunk). Show the
        returned prefix through :meth:`text_after`.
        """
        n = len(pending)
        cut = n - self._secret_prefix_len(pending)
        block = _open_block(pending, cut)
        if block is not None:
            start = pending.rfind("\n", 0, block.start()) + 1
            if n - start <= MAX_HELD_CHARS:
                cut = start  # a private key without its end yet: wait for it
        newline = pending.rfind("\n", 0, cut)
        line_start = newline + 1
        if line_start == cut:
            return cut
        line = pending[line_start:cut] if newline >= 0 else context + pending[:cut]
        if self._has_secret(line) or _may_match_pattern(line):
            if n - line_start <= MAX_HELD_CHARS:
                return line_start
        else:
            space = max(pending.rfind(" ", line_start, cut), pending.rfind("\t", line_start, cut))
            if space >= 0:
                return space + 1
            if n - line_start <= MAX_HELD_CHARS:
                return line_start
        return cut

    def _secret_prefix_len(self, s: str) -> int:
        """Length of the longest suffix of ``s`` that is a proper prefix of a bound secret."""
        prefixes = self._secret_prefixes
        if not prefixes:
            return 0
        firsts = self._secret_firsts
        n = len(s)
        for i in range(max(0, n - self._secret_longest + 1), n):
            if s[i] in firsts and s[i:] in prefixes:
                return n - i
        return 0

    def stream_context(self, context: str, shown: str) -> str:
        """What the text that follows ``shown`` (which followed ``context``) is redacted against.

        The shown part of the current line (bounded), or, inside a private key whose
        end has not come yet, its first line: whatever follows stays hidden until the
        end arrives, however the key was split.
        """
        whole = context + shown
        block = _open_block(whole, len(whole))
        if block is not None:
            return block.group(0)
        newline = whole.rfind("\n")
        return whole[newline + 1 :][-STREAM_CONTEXT_CHARS:]

    def text_after(self, context: str, s: str) -> str:
        """Redact ``s``, which continues ``context`` (already shown, unchangeable).

        Patterns see the context, so a key shown before (``password:``) still hides
        the value that follows it. Should a match reach back into the shown context,
        the whole of ``s`` is hidden (fail closed; reported as a fallback).
        """
        if not context:
            return self.text(s)
        whole = self.text(context + s)
        if whole.startswith(context):
            return whole[len(context) :]
        self._fallbacks.append("a match reached into text already shown; the new text hidden")
        return MARKER

    def value_checked(self, v: JsonValue) -> Redacted:
        """Like :meth:`value`, also telling whether anything was redacted or fell back."""
        flags = _Flags()
        out = self._walk(v, _NOT_A_KEY, flags, 0)
        return Redacted(out, flags.redacted, flags.fallback, tuple(flags.reasons))

    def _walk(self, v: JsonValue, ctx: KeyClass, flags: _Flags, depth: int) -> JsonValue:
        t = type(v)
        if t is str:
            if ctx.secret and not ctx.schema:
                if v != MARKER:
                    flags.redacted = True
                return MARKER
            return self._text_into(v, flags)
        if t is bool or v is None:
            return v
        if t is int or t is float:
            return self._number(v, ctx, flags)
        if depth >= MAX_DEPTH:
            flags.fail(f"JSON nested deeper than {MAX_DEPTH}; value hidden")
            return MARKER
        if t is dict:
            return self._dict(v, ctx, flags, depth)
        if t is list or t is tuple:
            return self._list(v, ctx, flags, depth)
        if isinstance(v, str | int | float | Mapping | list | tuple):
            return self._walk(_plain(v), ctx, flags, depth)
        flags.fail(f"non-JSON value of type {type(v).__name__}; value hidden")
        return MARKER

    def _number(self, v: float, ctx: KeyClass, flags: _Flags) -> JsonValue:
        exempt = ctx.counts and math.isfinite(v)
        if ctx.secret and not exempt:
            flags.redacted = True
            return MARKER
        if (
            self._secret_re is not None
            and not exempt
            and abs(v) >= 10 ** (MIN_SECRET_LENGTH - 1)
            and self._has_secret(repr(v))
        ):
            flags.redacted = True
            return MARKER
        return v

    def _dict(self, v: dict[Any, Any], ctx: KeyClass, flags: _Flags, depth: int) -> JsonValue:
        out: dict[str, JsonValue] = {}
        pair_secret = "value" in v and self._names_secret(v)
        for k, child in v.items():
            if type(k) is not str:
                flags.fail("non-string JSON object key; entry hidden")
                out[f"{MARKER}#{len(out)}"] = MARKER
                continue
            cls = self._classify(k)
            child_ctx = KeyClass(
                secret=ctx.secret or cls.secret or (pair_secret and k == "value"),
                counts=cls.counts or (ctx.counts and not cls.secret),
                schema=cls.schema,
                header=cls.header,
            )
            if k in self._clean_keys:
                key = k
            else:
                key = self._text_into(k, flags)
                if key is k:
                    if len(self._clean_keys) >= _KEY_CACHE_MAX:
                        self._clean_keys = set()
                    self._clean_keys.add(k)
            out[key] = self._walk(child, child_ctx, flags, depth + 1)
        return out

    def _names_secret(self, d: dict[Any, Any]) -> bool:
        """``{"name": "API_KEY", "value": "…"}`` (ACP env lists, headers) hides ``value``."""
        for name_key in ("name", "key", "header"):
            name = d.get(name_key)
            if type(name) is str and self._classify(name).secret:
                return True
        return False

    def _list(
        self, v: list[Any] | tuple[Any, ...], ctx: KeyClass, flags: _Flags, depth: int
    ) -> JsonValue:
        out: list[JsonValue] = []
        hide_next = False
        for item in v:
            if hide_next and type(item) is str:
                hide_next = False
                if item != MARKER:
                    flags.redacted = True
                out.append(MARKER)
                continue
            hide_next = False
            out.append(self._walk(item, ctx, flags, depth + 1))
            if type(item) is str and item.startswith("--") and "=" not in item:
                # argv arrays: ["--token", "abc"] hides the element after a secret flag.
                hide_next = self._classify(item[2:], flag=True).secret
        return out


def _ident_len(s: str, at: int) -> int:
    i = at
    n = len(s)
    while i < n and s[i] in _ID_CHARS and s[i] != "$":
        i += 1
    return i - at


def _splice(s: str, spans: list[Span]) -> str:
    """Replace the union of ``spans`` (overlapping or touching spans merge) by MARKER."""
    spans.sort()
    out: list[str] = []
    pos = 0
    cur_start, cur_end = spans[0]
    for start, end in spans[1:]:
        if start <= cur_end:
            cur_end = max(cur_end, end)
            continue
        out.append(s[pos:cur_start])
        out.append(MARKER)
        pos = cur_end
        cur_start, cur_end = start, end
    out.append(s[pos:cur_start])
    out.append(MARKER)
    out.append(s[cur_end:])
    return "".join(out)


def _plain(v: Any) -> JsonValue:
    """Subclasses of JSON types (str enums, OrderedDict…) as their plain base type."""
    if isinstance(v, bool):
        return bool(v)
    if isinstance(v, str):
        return str(v)
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, Mapping):
        return dict(v)
    return list(v)


# ------------------------------------------------------------------------ benchmark


def bench_redactor(
    iterations: int = 200_000, *, repeat: int = 5, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """Micro-benchmark of the hot path: µs per call for typical inputs (best of ``repeat``).

    Returns ``{case: microseconds_per_call}``. Run it with
    ``python -c "from baton.security.redact import bench_redactor; print(bench_redactor())"``.
    """
    redactor = Redactor(["sk-ant-api03-benchmarkbenchmarkbenchmark", "hunter2hunter2!"])
    cases: dict[str, Callable[[], object]] = {}
    plain = "Reading file src/baton/runner/session.py"
    chunk = "I'll update the function so the edge case is handled."
    status = "in_progress"
    ident = "call_01HX9ZQ3K8M2"
    noisy = "Running tests: 42 passed, 0 failed in 3.2s"
    secret = "export ANTHROPIC_API_KEY="  # noqa: S105 - a benchmark fixture
    secret += "sk-ant-api03-benchmarkbenchmarkbenchmark"
    event = {
        "tool_call_id": "call_01HX9ZQ3K8M2",
        "title": "Read src/baton/runner/session.py",
        "kind": "read",
        "status": "completed",
        "locations": [{"path": "src/baton/runner/session.py", "line": 12}],
    }
    cases["text: short plain"] = lambda: redactor.text(plain)
    cases["text: transcript chunk"] = lambda: redactor.text(chunk)
    cases["text: status"] = lambda: redactor.text(status)
    cases["text: id with underscore"] = lambda: redactor.text(ident)
    cases["text: triggers slow path, clean"] = lambda: redactor.text(noisy)
    cases["text: bound secret"] = lambda: redactor.text(secret)
    cases["value: small tool event"] = lambda: redactor.value(event)
    results: dict[str, float] = {}
    for name, fn in cases.items():
        n = max(1, iterations // (10 if name.startswith("value") else 1) // repeat)
        best = math.inf
        for _ in range(repeat):  # best of ``repeat``: robust against a busy machine
            start = clock()
            for _ in range(n):
                fn()
            best = min(best, (clock() - start) / n)
        results[name] = round(best * 1e6, 3)
    return results
