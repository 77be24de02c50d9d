"""A shop with orders, whose confirmation e-mails are pgbeat jobs."""
