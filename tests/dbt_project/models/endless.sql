-- Tens of billions of rows: runs until the test kills dbt mid-model.
select sum(a.range * b.range) as total from range(1000000) a cross join range(1000000) b
