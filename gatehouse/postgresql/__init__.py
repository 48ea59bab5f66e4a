"""Django's PostgreSQL backend with a pooled connection's checkout checked without a query."""
