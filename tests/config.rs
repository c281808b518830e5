//! Configuration: unknown keys and bad values are refused, naming the key.

use floe::config::{ServeArgs, ServeConfig, parse_file_config};

#[test]
fn unknown_keys_are_refused_with_their_name() {
    let err = parse_file_config("flight_adress = \"127.0.0.1:1\"").unwrap_err();
    assert!(err.contains("flight_adress"), "{err}");
    let err = parse_file_config("[catalog]\ntpye = \"sql\"").unwrap_err();
    assert!(err.contains("tpye"), "{err}");
}

#[test]
fn bad_values_name_the_key() {
    let err = parse_file_config("local_executors = \"two\"").unwrap_err();
    assert!(err.contains("local_executors"), "{err}");

    let args = ServeArgs {
        flight_addr: Some("localhost".into()),
        ..Default::default()
    };
    let err = ServeConfig::resolve(&args).unwrap_err();
    assert!(err.message.contains("flight_addr"), "{}", err.message);

    let args = ServeArgs {
        catalog_type: Some("hive".into()),
        ..Default::default()
    };
    let err = ServeConfig::resolve(&args).unwrap_err();
    assert!(err.message.contains("catalog.type"), "{}", err.message);
}

#[test]
fn defaults_are_the_embedded_single_machine_setup() {
    let config = ServeConfig::resolve(&ServeArgs::default()).expect("defaults are valid");
    assert_eq!(config.flight_addr.to_string(), "127.0.0.1:32010");
    assert_eq!(config.scheduler_addr.to_string(), "127.0.0.1:50050");
    assert!(config.flight_addr.ip().is_loopback() && config.scheduler_addr.ip().is_loopback());
    assert_eq!(config.local_executors, 1);
    assert_eq!(config.catalog.name, "floe");
    assert!(
        config.catalog.uri.starts_with("sqlite:")
            && config.catalog.uri.ends_with("floe-data/catalog.db")
    );
    assert!(config.catalog.warehouse.ends_with("floe-data/warehouse"));
}

#[test]
fn flags_override_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("floe.toml");
    std::fs::write(
        &path,
        "local_executors = 3\nexecutor_slots = 2\n[catalog]\nname = \"lake\"\n",
    )
    .expect("write");
    let args = ServeArgs {
        config: Some(path),
        local_executors: Some(0),
        ..Default::default()
    };
    let config = ServeConfig::resolve(&args).expect("valid");
    assert_eq!(config.local_executors, 0);
    assert_eq!(config.executor_slots, 2);
    assert_eq!(config.catalog.name, "lake");
}

fn config_file(dir: &std::path::Path, text: &str) -> ServeArgs {
    let path = dir.join("floe.toml");
    std::fs::write(&path, text).expect("config written");
    ServeArgs {
        config: Some(path),
        data_dir: Some(dir.join("data")),
        ..Default::default()
    }
}

#[test]
fn auth_settings_are_checked_at_start_and_never_printed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let hash = floe::auth::password::hash("pw-for-the-test").expect("hash");
    let secret = "s".repeat(40);
    std::fs::write(dir.path().join("jwt.secret"), &secret).expect("secret written");
    let users =
        format!("[[auth.users]]\nname = \"alice\"\npassword_hash = \"{hash}\"\nread = [\"*\"]\n");
    let secret_file = format!(
        "jwt_secret_file = \"{}\"\n",
        dir.path().join("jwt.secret").display()
    );

    // Reachable from other machines: only with [auth].
    let open = config_file(dir.path(), "flight_addr = \"0.0.0.0:32010\"");
    let err = ServeConfig::resolve(&open).unwrap_err();
    assert!(err.message.contains("[auth]"), "{}", err.message);
    let text = format!("flight_addr = \"0.0.0.0:32010\"\n[auth]\n{secret_file}{users}");
    let config = ServeConfig::resolve(&config_file(dir.path(), &text)).expect("valid");
    let auth = config.auth.as_ref().expect("auth on");
    assert_eq!(auth.jwt_secret.expose(), secret);
    assert_eq!(auth.token_ttl.as_secs(), 3600);
    let printed = format!("{config:?}");
    assert!(
        !printed.contains(&secret) && !printed.contains(&hash),
        "{printed}"
    );

    for (bad, named) in [
        (format!("[auth]\n{secret_file}"), "auth.users"),
        (
            format!("[auth]\n{secret_file}{}", users.replace(&hash, "plaintext")),
            "password_hash",
        ),
        (
            format!("[auth]\n{secret_file}token_ttl_secs = 0\n{users}"),
            "token_ttl_secs",
        ),
        (
            format!("[auth]\n{secret_file}{users}{users}"),
            "given twice",
        ),
        (
            format!("tls_cert = \"/x.pem\"\n[auth]\n{secret_file}{users}"),
            "tls_key",
        ),
    ] {
        let err = ServeConfig::resolve(&config_file(dir.path(), &bad)).unwrap_err();
        assert!(err.message.contains(named), "{named}: {}", err.message);
        assert!(!err.message.contains(&hash) && !err.message.contains(&secret));
    }
    std::fs::write(dir.path().join("jwt.secret"), "short").expect("secret written");
    let err = ServeConfig::resolve(&config_file(
        dir.path(),
        &format!("[auth]\n{secret_file}{users}"),
    ))
    .unwrap_err();
    assert!(err.message.contains("32 bytes"), "{}", err.message);
}

#[test]
fn rest_and_postgres_catalogs_are_checked_and_never_print_passwords() {
    let rest = ServeArgs {
        catalog_type: Some("rest".into()),
        ..Default::default()
    };
    let err = ServeConfig::resolve(&rest).unwrap_err();
    assert!(err.message.contains("catalog.uri"), "{}", err.message);
    let rest = ServeArgs {
        catalog_type: Some("rest".into()),
        catalog_uri: Some("http://127.0.0.1:8181".into()),
        ..Default::default()
    };
    let config = ServeConfig::resolve(&rest).expect("valid");
    assert_eq!(
        config.catalog.warehouse, "",
        "a REST catalog has no default warehouse"
    );

    let shared = ServeArgs {
        catalog_uri: Some("postgres://floe:s3cr3t-pw@db:5432/catalog".into()),
        ..Default::default()
    };
    let config = ServeConfig::resolve(&shared).expect("valid");
    let printed = format!("{config:?}");
    assert!(!printed.contains("s3cr3t-pw"), "{printed}");
    assert!(
        printed.contains("postgres://floe:***@db:5432/catalog"),
        "{printed}"
    );
    assert_eq!(
        floe::config::redacted_uri("sqlite:/data/catalog.db"),
        "sqlite:/data/catalog.db"
    );
    let mysql = ServeArgs {
        catalog_uri: Some("mysql://db/catalog".into()),
        ..Default::default()
    };
    assert!(ServeConfig::resolve(&mysql).is_err());
}
