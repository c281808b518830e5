import java.net.URI;
import java.util.Arrays;

import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightEndpoint;
import org.apache.arrow.flight.FlightInfo;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.flight.Location;
import org.apache.arrow.flight.sql.FlightSqlClient;
import org.apache.arrow.flight.sql.impl.FlightSql;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/**
 * Queries Floe the way the Flight SQL JDBC driver (and so DBeaver, Tableau and other
 * JDBC tools) does, with Apache Arrow's Java Flight SQL client: GetSqlInfo, then the
 * catalog browsing calls, then every statement through a prepared statement (an empty
 * result schema means an update).
 *
 * <pre>
 * javac -cp "$JARS/*" FloeFlightSql.java
 * java --add-opens=java.base/java.nio=ALL-UNNAMED -cp "$JARS/*:." FloeFlightSql \
 *     grpc://127.0.0.1:32010 "CREATE SCHEMA IF NOT EXISTS demo" "SELECT 1 AS one"
 * </pre>
 *
 * Prints each result row as a tab-separated line after a label.
 */
public class FloeFlightSql {
  public static void main(String[] args) throws Exception {
    URI uri = new URI(args[0]);
    try (BufferAllocator allocator = new RootAllocator();
        FlightClient flight =
            FlightClient.builder(allocator, Location.forGrpcInsecure(uri.getHost(), uri.getPort()))
                .build();
        FlightSqlClient sql = new FlightSqlClient(flight)) {
      print("sql_info", sql, sql.getSqlInfo(new FlightSql.SqlInfo[0]));
      print("catalogs", sql, sql.getCatalogs());
      print("schemas", sql, sql.getSchemas(null, null));
      print("table_types", sql, sql.getTableTypes());
      print("tables", sql, sql.getTables(null, null, "%", null, true));
      for (String statement : Arrays.copyOfRange(args, 1, args.length)) {
        try (FlightSqlClient.PreparedStatement prepared = sql.prepare(statement)) {
          if (prepared.getResultSetSchema().getFields().isEmpty()) {
            System.out.println("update\t" + prepared.executeUpdate());
          } else {
            print("query", sql, prepared.execute());
          }
        }
      }
    }
  }

  private static void print(String label, FlightSqlClient sql, FlightInfo info) throws Exception {
    for (FlightEndpoint endpoint : info.getEndpoints()) {
      try (FlightStream stream = sql.getStream(endpoint.getTicket())) {
        while (stream.next()) {
          for (String row : stream.getRoot().contentToTSVString().split("\n")) {
            System.out.println(label + "\t" + row);
          }
        }
      }
    }
  }
}
