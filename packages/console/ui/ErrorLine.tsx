/** An error shown where the person acted (announced to assistive technology); `id`: for the fields it names to point at (`invalidProps`). */
export function ErrorLine({ error, id }: { error: string | null; id?: string }) {
  return error ? (
    <div className="error" role="alert" id={id}>
      {error}
    </div>
  ) : null;
}
