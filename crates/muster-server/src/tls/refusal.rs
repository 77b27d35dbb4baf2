//! Why a client certificate was refused, in words an operator can act on. rustls reports a
//! refusal as an error value (`InvalidCertificate(Other(UnsupportedCertVersion))` for an X.509
//! v1 certificate, which `openssl x509 -req` makes when it is given no extension file): the log
//! line and the handshake failure say the cause and what to do, with rustls's own text after it.

use rustls::CertificateError;

/// The cause of a refused client certificate, and rustls's description of it.
pub fn explain(error: &CertificateError) -> String {
    let cause = match error {
        CertificateError::Other(other)
            if other.0.downcast_ref::<webpki::Error>()
                == Some(&webpki::Error::UnsupportedCertVersion) =>
        {
            "the client certificate is X.509 v1; v3 is required (issue it with an extension \
             file, as docs/security.md shows: `openssl x509 -req ... -extfile client.ext`)"
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "the client certificate has expired"
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "the client certificate is not valid yet (check the clocks)"
        }
        CertificateError::UnknownIssuer => {
            "the client certificate is not signed by a CA in --tls-client-ca"
        }
        CertificateError::BadSignature => "the client certificate's signature does not verify",
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            "the client certificate is not for client authentication (its extendedKeyUsage \
             lacks clientAuth)"
        }
        CertificateError::BadEncoding => "the client certificate cannot be parsed",
        CertificateError::Revoked => "the client certificate is revoked",
        CertificateError::UnhandledCriticalExtension => {
            "the client certificate has a critical extension this server does not know"
        }
        _ => return format!("the client certificate was refused: {error}"),
    };
    format!("{cause} ({error})")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::OtherError;

    use super::*;

    #[test]
    fn a_version_1_certificate_is_named_as_such() {
        let error =
            CertificateError::Other(OtherError(Arc::new(webpki::Error::UnsupportedCertVersion)));
        let text = explain(&error);
        assert!(
            text.starts_with("the client certificate is X.509 v1; v3 is required"),
            "{text}"
        );
        assert!(text.contains("-extfile"), "{text}");
    }

    #[test]
    fn common_causes_are_named_and_others_keep_rustls_words() {
        for (error, cause) in [
            (CertificateError::Expired, "has expired"),
            (CertificateError::UnknownIssuer, "--tls-client-ca"),
            (CertificateError::InvalidPurpose, "clientAuth"),
            (CertificateError::BadSignature, "signature"),
        ] {
            let text = explain(&error);
            assert!(text.contains(cause), "{text}");
            assert!(text.contains(&error.to_string()), "{text}");
        }
        let other = CertificateError::Other(OtherError(Arc::new(webpki::Error::BadDer)));
        assert!(explain(&other).starts_with("the client certificate was refused: "));
    }
}
