import java.net.URI;
import java.util.Arrays;

import org.apache.arrow.flight.CallOption;
import org.apache.arrow.flight.FlightClient;
import org.apache.arrow.flight.FlightEndpoint;
import org.apache.arrow.flight.FlightInfo;
import org.apache.arrow.flight.FlightStream;
import org.apache.arrow.flight.Location;
import org.apache.arrow.flight.auth2.BearerCredentialWriter;
import org.apache.arrow.flight.client.ClientCookieMiddleware;
import org.apache.arrow.flight.grpc.CredentialCallOption;
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
 *
 * <p>With {@code [auth]} on the server, set {@code FLOE_USER} and {@code FLOE_PASSWORD}
 * (Basic credentials on Handshake, as JDBC's {@code user=}/{@code password=}) or
 * {@code FLOE_TOKEN} (a bearer token on Handshake, as JDBC's {@code token=}); the bearer
 * then goes with every call.
 */
public class FloeFlightSql {
  public static void main(String[] args) throws Exception {
    URI uri = new URI(args[0]);
    try (BufferAllocator allocator = new RootAllocator();
        FlightClient flight =
            FlightClient.builder(allocator, Location.forGrpcInsecure(uri.getHost(), uri.getPort()))
                // The JDBC driver keeps cookies: the session's (see `USE`) among them.
                .intercept(new ClientCookieMiddleware.Factory())
                .build();
        FlightSqlClient sql = new FlightSqlClient(flight)) {
      CallOption[] auth = logIn(flight);
      print("sql_info", sql, sql.getSqlInfo(new FlightSql.SqlInfo[0], auth), auth);
      print("catalogs", sql, sql.getCatalogs(auth), auth);
      print("schemas", sql, sql.getSchemas(null, null, auth), auth);
      print("table_types", sql, sql.getTableTypes(auth), auth);
      print("tables", sql, sql.getTables(null, null, "%", null, true, auth), auth);
      for (String statement : Arrays.copyOfRange(args, 1, args.length)) {
        FlightSqlClient.PreparedStatement prepared = sql.prepare(statement, auth);
        try {
          if (prepared.getResultSetSchema().getFields().isEmpty()) {
            System.out.println("update\t" + prepared.executeUpdate(auth));
          } else {
            print("query", sql, prepared.execute(auth), auth);
          }
        } finally {
          prepared.close(auth);
        }
      }
    }
  }

  /** Handshake as the JDBC driver does; returns the bearer to send with every call. */
  private static CallOption[] logIn(FlightClient flight) {
    String token = System.getenv("FLOE_TOKEN");
    String user = System.getenv("FLOE_USER");
    if (token != null) {
      CredentialCallOption bearer = new CredentialCallOption(new BearerCredentialWriter(token));
      flight.handshake(bearer);
      return new CallOption[] {bearer};
    }
    if (user != null) {
      String password = System.getenv("FLOE_PASSWORD");
      return new CallOption[] {flight.authenticateBasicToken(user, password).orElseThrow()};
    }
    return new CallOption[0];
  }

  private static void print(String label, FlightSqlClient sql, FlightInfo info, CallOption[] auth)
      throws Exception {
    for (FlightEndpoint endpoint : info.getEndpoints()) {
      try (FlightStream stream = sql.getStream(endpoint.getTicket(), auth)) {
        while (stream.next()) {
          for (String row : stream.getRoot().contentToTSVString().split("\n")) {
            System.out.println(label + "\t" + row);
          }
        }
      }
    }
  }
}
