"""Collection: tier log formats, matching log records to a run by its tag, resource sampling."""
