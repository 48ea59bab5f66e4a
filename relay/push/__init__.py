"""Push to phones: Web Push (VAPID, RFC 8291) and ntfy, with one-time action tokens."""
